package osbserve

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/berth-sh/berth/serve/internal/core"
	"github.com/berth-sh/berth/serve/opensandbox"
)

// proxy serves /sandboxes/{id}/proxy/{port}/{path...}: execd (44772) and
// the egress API (18080) of the sandbox named by the path, and nothing else.
// The caller proves its right to that sandbox by its execd access token
// (X-EXECD-ACCESS-TOKEN, which the endpoint lookup handed out) or by the
// API key that owns it. Without either the answer is 401 whether or not the
// sandbox exists; another key's sandbox is 404, as a missing one.
func (o *Server) proxy(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	o.mu.Lock()
	b := o.byID[id]
	o.mu.Unlock()
	if !o.proxyAuthorized(w, r, b) {
		return
	}
	waitReady(r.Context(), b, o.readyWait)
	state, _, message, _, execd := b.snapshot()
	switch state {
	case opensandbox.StatePending:
		w.Header().Set("Retry-After", "1")
		opensandbox.WriteError(w, http.StatusServiceUnavailable, opensandbox.CodeUnavailable, fmt.Sprintf("sandbox %s is still being created", id))
		return
	case opensandbox.StateFailed:
		opensandbox.WriteError(w, http.StatusBadGateway, opensandbox.CodeUnavailable, fmt.Sprintf("sandbox %s failed to start: %s", id, message))
		return
	}
	if o.c.Get(id) == nil {
		// Deleted (or expired) a moment ago; its execd is closed.
		opensandbox.WriteError(w, http.StatusNotFound, opensandbox.CodeNotFound, fmt.Sprintf("sandbox %q not found", id))
		return
	}
	var h http.Handler
	switch port, _ := strconv.Atoi(r.PathValue("port")); port {
	case opensandbox.ExecdPort:
		h = execd
	case opensandbox.EgressPort:
		h = b.egress
	default:
		opensandbox.WriteError(w, http.StatusNotFound, opensandbox.CodeNotFound,
			fmt.Sprintf("port %s of sandbox %s is not served: berth serve serves execd (%d) and the egress API (%d)", r.PathValue("port"), id, opensandbox.ExecdPort, opensandbox.EgressPort))
		return
	}
	// The handler sees execd's own paths; credentials go no further.
	r2 := r.Clone(r.Context())
	r2.URL.Path, r2.URL.RawPath = "/"+r.PathValue("path"), ""
	r2.Header.Del(opensandbox.APIKeyHeader)
	r2.Header.Del(opensandbox.AccessTokenHeader)
	h.ServeHTTP(w, r2)
}

// proxyAuthorized checks the token, then the key; false means it has
// answered.
func (o *Server) proxyAuthorized(w http.ResponseWriter, r *http.Request, b *instance) bool {
	if tok := r.Header.Get(opensandbox.AccessTokenHeader); tok != "" && b != nil && core.SecretEqual(tok, b.token) {
		return true
	}
	key := r.Header.Get(opensandbox.APIKeyHeader)
	keyID, ok := o.opts.Keys.Check(key)
	switch {
	case ok && b != nil && b.keyID == keyID:
		return true
	case ok:
		opensandbox.WriteError(w, http.StatusNotFound, opensandbox.CodeNotFound, fmt.Sprintf("sandbox %q not found", r.PathValue("id")))
	default:
		o.m.AuthFails.WithLabelValues("opensandbox").Inc()
		opensandbox.WriteError(w, http.StatusUnauthorized, opensandbox.CodeInvalidAPIKey,
			"missing or invalid credentials: send the endpoint's "+opensandbox.AccessTokenHeader+" or the owner's "+opensandbox.APIKeyHeader)
	}
	return false
}
