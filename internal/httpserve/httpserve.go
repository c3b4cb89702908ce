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

// ClientIdleTimeout is how long berth's HTTP clients keep an idle
// connection to the servers they call in and beside sandboxes (agents,
// OpenEnv, HUD and Gym servers, a sandbox's own ports, inference
// engines): less than the shortest keep-alive among them (uvicorn's 5 s,
// under vLLM, SGLang and FastAPI) and than the header timeout net/http
// gives a connection not used yet (10 s). Otherwise the server hangs up
// just as the client sends on the connection, and Go retries the call
// only when it is idempotent and the connection had served one before: an
// agent's next completion after a 5 s tool call failed that way.
const ClientIdleTimeout = 4 * time.Second

// Transport is http.DefaultTransport's settings with ClientIdleTimeout.
func Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.IdleConnTimeout = ClientIdleTimeout
	return t
}

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

// Start serves h on Listener(ln) in the background, with NewServer's
// limits; Close the server it returns to stop it. Serve is the same with a
// context and a graceful stop.
func Start(ln net.Listener, h http.Handler, readTimeout time.Duration) *http.Server {
	hs := NewServer(h, readTimeout)
	go func() { _ = hs.Serve(Listener(ln)) }()
	return hs
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
