// Package httpserve runs berth's HTTP servers (berth serve, the session
// server, OpenEnv, the viewer, the pod agent) one way: header and idle
// limits a slow or idle client cannot stretch, and a stop on the
// context's end that lets open calls finish for a grace period before it
// closes what is left.
package httpserve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// Options tune Serve. The zero value is the common case.
type Options struct {
	// Grace is how long open calls (streams included) get to finish once
	// ctx ends; 0 means 5 s.
	Grace time.Duration
	// ReadTimeout bounds reading a whole request, body included; 0 means
	// none (uploads and streams set their own deadlines).
	ReadTimeout time.Duration
	// BeforeShutdown runs once ctx ends, before the listener stops: for
	// connections the http.Server does not track, such as hijacked
	// WebSockets, whose ends the shutdown would otherwise wait for.
	BeforeShutdown func()
}

// NewServer is an http.Server for h with berth's limits: 10 s to send the
// headers, 64 KiB of them, 2 min idle keep-alive.
func NewServer(h http.Handler, readTimeout time.Duration) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       readTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}

// Serve serves h on ln until ctx ends, then shuts down gracefully (see
// Options). It returns nil after a stop that ctx asked for, and the
// server's error when serving failed on its own.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, o Options) error {
	hs := NewServer(h, o.ReadTimeout)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	if o.BeforeShutdown != nil {
		o.BeforeShutdown()
	}
	grace := o.Grace
	if grace <= 0 {
		grace = 5 * time.Second
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close() // calls that did not end in time
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
