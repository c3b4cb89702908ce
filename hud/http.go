package hud

import (
	"context"
	"net"
	"net/http"

	"github.com/berth-sh/berth/internal/httpserve"
)

// HTTPClient returns an HTTP client whose every connection is a tunnel to
// capability on the control channel at addr, as HUD's client forwards an
// HTTP binding (MCP) through the control port, and which sends token as a
// bearer token when it is set. Requests keep their URL's path.
func HTTPClient(addr, capability, token string) *http.Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return DialTunnel(ctx, addr, capability)
		},
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     httpserve.ClientIdleTimeout,
	}
	var rt http.RoundTripper = tr
	if token != "" {
		rt = bearer{token: token, next: tr}
	}
	return &http.Client{Transport: rt}
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}
