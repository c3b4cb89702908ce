package serve

import (
	"log/slog"
	"net/http"

	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/serve/e2bserve"
	"github.com/berth-sh/berth/serve/internal/core"
	"github.com/berth-sh/berth/serve/osbserve"
)

// Server is the E2B and OpenSandbox APIs over one provider, on one
// address. It is an http.Handler; Close stops its timers and deletes its
// sandboxes.
type Server struct {
	c    *core.Server
	e2b  *e2bserve.API
	osb  *osbserve.Server
	opts *Options
	log  *slog.Logger
	p    *sandbox.Provider
}

var _ http.Handler = (*Server)(nil)

// New validates opts and builds the server.
func New(opts Options) (*Server, error) {
	c, err := core.New(opts)
	if err != nil {
		return nil, err
	}
	return newServer(c)
}

// newServer puts both APIs over c.
func newServer(c *core.Server) (*Server, error) {
	e, err := e2bserve.New(c)
	if err != nil {
		return nil, err
	}
	return &Server{c: c, e2b: e, osb: osbserve.New(c), opts: c.Options(), log: c.Logger(), p: c.Provider()}, nil
}

// ServeHTTP sends a call to the E2B data plane when it names a sandbox
// (by header or host) or is an envd path, else to the OpenSandbox API
// when it is one of its routes (under /v1/, and the proxy path
// /sandboxes/{id}/proxy/), else to the E2B control plane. The OpenSandbox
// routes are paths the E2B API does not have, so that one address, one
// key file and one per-key pool serve both.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.e2b.IsData(r) && s.osb.Match(r) {
		s.osb.ServeHTTP(w, r)
		return
	}
	s.e2b.ServeHTTP(w, r)
}

// Close deletes the server's sandboxes (unless KeepOnClose) and stops
// their timers. Call it after the http.Server has stopped taking calls.
func (s *Server) Close() error {
	s.osb.Close() // creates in flight delete what they made
	s.e2b.Close() // builds in flight end and delete their sandboxes
	return s.c.Close()
}
