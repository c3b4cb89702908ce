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

// Limits of NewServer. IdleTimeout is longer than any client's keep-alive
// (Go's transport keeps an idle connection 90 s), so that the client, not
// the server, ends an idle connection: a server that hangs up first races
// the client's next call on it.
const (
	HeaderTimeout = 10 * time.Second
	IdleTimeout   = 2 * time.Minute
)

// ClientIdleTimeout is how long berth's clients of servers in sandboxes
// (agents, OpenEnv and HUD servers) keep an idle connection: less than the
// shortest keep-alive among those servers (uvicorn's 5 s) and than the
// header timeout net/http gives a connection not yet used (10 s), so that
// the server never hangs up on a connection the client is about to use.
// Go retries such a call only when it is idempotent and the connection
// had served one before.
const ClientIdleTimeout = 4 * time.Second

// NewServer is an http.Server for h with berth's limits: HeaderTimeout to
// send the headers, 64 KiB of them, IdleTimeout between calls. Serve it
// on Listener(ln), so that a new connection gets IdleTimeout, not
// HeaderTimeout, until its first byte.
func NewServer(h http.Handler, readTimeout time.Duration) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: HeaderTimeout,
		ReadTimeout:       readTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    64 << 10,
	}
}

// Serve serves h on ln until ctx ends, then shuts down gracefully (see
// Options). It returns nil after a stop that ctx asked for, and the
// server's error when serving failed on its own.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, o Options) error {
	hs := NewServer(h, o.ReadTimeout)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(Listener(ln)) }()
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
