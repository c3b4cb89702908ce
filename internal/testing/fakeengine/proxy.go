package fakeengine

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
)

// Loopback is the address of a sandbox's port: the fakes' commands share
// the host's network, so a server started in a sandbox listens on the
// host's loopback address.
func Loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// Proxy is a reverse proxy to a sandbox's port (Loopback) for the wires'
// preview and port routes: the request's path becomes urlPath ("" keeps
// it), the headers named in drop (the wire's credentials) are not passed
// on, and fail answers when nothing listens there.
func Proxy(port int, urlPath string, drop []string, fail func(http.ResponseWriter)) http.Handler {
	target := &url.URL{Scheme: "http", Host: Loopback(port)}
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			if urlPath != "" {
				pr.Out.URL.Path, pr.Out.URL.RawPath = urlPath, ""
			}
			for _, h := range drop {
				pr.Out.Header.Del(h)
			}
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) { fail(w) },
	}
}
