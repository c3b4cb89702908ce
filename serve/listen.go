package serve

import (
	"context"
	"net"
	"time"

	"github.com/berth-sh/berth/internal/httpserve"
)

// shutdownGrace is how long open calls (streams included) get to finish
// when the server stops.
const shutdownGrace = 5 * time.Second

// ListenAndServe serves the E2B API on addr until ctx ends, then stops
// taking calls, lets open ones finish for a few seconds, and closes the
// server (deleting its sandboxes unless opts.KeepOnClose). ready, when set,
// gets the URLs clients should use once the listener is open (addr may
// have port 0).
func ListenAndServe(ctx context.Context, addr string, opts Options, ready func(URLs)) error {
	s, err := New(opts)
	if err != nil {
		return err
	}
	defer s.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if ready != nil {
		ready(ClientURLs("http://"+ln.Addr().String(), s.opts.Domain))
	}
	s.log.Info("serving the E2B API", "addr", ln.Addr().String(), "provider", s.p.Name(), "domain", s.opts.Domain, "templates", s.opts.TemplateNames())
	return httpserve.Serve(ctx, ln, s, httpserve.Options{Grace: shutdownGrace})
}
