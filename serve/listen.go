package serve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
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
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          nil,
	}
	if ready != nil {
		ready(ClientURLs("http://"+ln.Addr().String(), s.opts.Domain))
	}
	s.log.Info("serving the E2B API", "addr", ln.Addr().String(), "provider", s.p.Name(), "domain", s.opts.Domain, "templates", s.opts.templateNames())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close() // streams that did not end in time
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
