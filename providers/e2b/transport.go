package e2b

import (
	"net/http"

	"github.com/berth-sh/berth/e2bapi"
)

// routeTransport adds the routing headers of a multiplexing data plane
// (E2B_SANDBOX_URL: one URL for every sandbox, the sandbox and port named
// per request) to every request of one sandbox's envd client; the
// connections are the base transport's, shared by every sandbox.
type routeTransport struct {
	base http.RoundTripper
	id   string
}

func (t *routeTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context()) // a RoundTripper must not change its request
	r.Header.Set(e2bapi.SandboxIDHeader, t.id)
	r.Header.Set(e2bapi.SandboxPortHeader, e2bapi.EnvdPort)
	return t.base.RoundTrip(r)
}
