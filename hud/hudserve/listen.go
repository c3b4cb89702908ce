package hudserve

import (
	"context"
	"errors"
	"net"

	"github.com/berth-sh/berth/hud"
)

// ListenAndServe serves o on addr until ctx ends, then closes the server
// (deleting every session's sandbox). ready, when set, hears the bound
// address once the control channel accepts connections.
func ListenAndServe(ctx context.Context, addr string, o Options, ready func(net.Addr)) error {
	s, err := New(o)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		s.Close()
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ln) }()
	if ready != nil {
		ready(ln.Addr())
	}
	select {
	case <-ctx.Done():
		s.Close()
		<-errc
		return nil
	case err := <-errc:
		s.Close()
		if errors.Is(err, hud.ErrServerClosed) {
			return nil
		}
		return err
	}
}
