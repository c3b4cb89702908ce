package opensandbox

import (
	"net/http"
)

// Egress answers the egress sidecar's API for one sandbox: GET /policy is
// the policy it was created with; changing a running sandbox's policy is
// refused (berth providers set the network at create).
type Egress struct {
	policy NetworkPolicy
	mode   string
}

// NewEgress serves policy; mode is the sidecar's word for it (allow_all,
// deny_all, allowlist).
func NewEgress(policy NetworkPolicy, mode string) *Egress {
	return &Egress{policy: policy, mode: mode}
}

func (g *Egress) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/policy" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		WriteJSON(w, http.StatusOK, PolicyStatus{Status: "ok", Mode: g.mode, Policy: g.policy})
	case r.URL.Path == "/policy":
		WriteError(w, http.StatusNotImplemented, CodeExecdUnsupported, "changing a running sandbox's egress policy is not supported by berth serve")
	default:
		WriteError(w, http.StatusNotFound, CodeExecdUnsupported, r.Method+" "+r.URL.Path+" is not served by berth's egress endpoint")
	}
}
