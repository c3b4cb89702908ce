package e2bserve

import (
	"log/slog"
	"net/http"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/serve/internal/core"
)

// EnvdVersion is the envd version the server reports. It must be semver
// and at least 0.4.0 (the server supplies the default user); the SDKs gate
// features on it: 0.5.2 closeStdin, 0.5.7 octet-stream upload.
const EnvdVersion = "0.6.0"

// API is the E2B API of a core.Server: its control plane and its data
// plane. It is an http.Handler; Close ends its template builds.
type API struct {
	c    *core.Server
	opts *core.Options
	log  *slog.Logger
	p    *sandbox.Provider
	caps sandbox.Capabilities
	m    *core.Metrics
	tpl  *templates // template builds (template_*.go)

	control http.Handler
	data    http.Handler
}

var _ http.Handler = (*API)(nil)

// New builds the E2B API over c.
func New(c *core.Server) (*API, error) {
	s := &API{c: c, opts: c.Options(), log: c.Logger(), p: c.Provider(), caps: c.Capabilities(), m: c.Metrics()}
	var err error
	if s.tpl, err = newTemplates(s); err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	s.routes(mux)
	s.control = c.Observe("control", core.ControlRoute, mux)
	s.data = c.Observe("data", core.EnvdRoute, http.HandlerFunc(s.serveData))
	return s, nil
}

// ServeHTTP sends a call to the data plane when IsData, else to the
// control plane.
func (s *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.IsData(r) {
		s.data.ServeHTTP(w, r)
		return
	}
	s.control.ServeHTTP(w, r)
}

// IsData tells data-plane calls apart: those that name a sandbox (by
// header or host) and envd's paths. Only /health is on both planes, and
// goes to the data plane when a sandbox is named (by header, host or
// access token).
func (s *API) IsData(r *http.Request) bool {
	if r.Header.Get(e2bapi.SandboxIDHeader) != "" {
		return true
	}
	if _, _, ok := s.hostTarget(r.Host); ok {
		return true
	}
	p := r.URL.Path
	if p == e2bapi.RouteHealth && r.Header.Get(envd.AccessTokenHeader) != "" {
		return true // SDKs 2.7 - 2.14.0: isRunning names the sandbox by token alone
	}
	return p == "/files" || isRPC(r)
}

// Close ends the template builds in flight, which delete their sandboxes.
// Call it before the core.Server's Close.
func (s *API) Close() { s.tpl.close() }

// authKey checks X-API-KEY and returns the key's ID; on failure it has
// answered 401.
func (s *API) authKey(w http.ResponseWriter, r *http.Request) (string, bool) {
	id, ok := s.opts.Keys.Check(r.Header.Get(e2bapi.APIKeyHeader))
	if !ok {
		s.m.AuthFails.WithLabelValues("control").Inc()
		writeError(w, http.StatusUnauthorized, "Invalid API key: send a key of this server as X-API-KEY")
		return "", false
	}
	return id, true
}

// owned returns the key's sandbox by ID; another key's sandbox is as
// unknown as a missing one. On failure it has answered 404.
func (s *API) owned(w http.ResponseWriter, r *http.Request, keyID string) *core.Record {
	id := r.PathValue("sandboxID")
	rec := s.c.Get(id)
	if rec == nil || rec.KeyID != keyID {
		writeError(w, http.StatusNotFound, "sandbox %q not found", id)
		return nil
	}
	return rec
}
