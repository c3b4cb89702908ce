package driver

import "net/http"

// EnvdEndpoint says where a sandbox's own envd server answers (see
// driver.EnvdServer).
type EnvdEndpoint struct {
	// BaseURL is the server's base URL, e.g. "http://envd" for a unix
	// socket dialled by Transport.
	BaseURL string
	// Transport carries the calls (a unix-socket dialer); nil means
	// http.DefaultTransport.
	Transport http.RoundTripper
	// AccessToken, when set, is sent as X-Access-Token on every call. It is
	// a secret: never log it.
	AccessToken string
}
