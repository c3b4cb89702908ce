package session

import (
	"context"
	"net"
	"time"

	"github.com/berth-sh/berth/internal/httpserve"
)

// ListenAndServe serves a new server on addr until ctx ends, then shuts it
// down gracefully. ready, when set, gets the base URL once listening.
func ListenAndServe(ctx context.Context, addr string, o Options, ready func(baseURL string)) error {
	s, err := New(o)
	if err != nil {
		return err
	}
	defer s.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if ready != nil {
		ready("http://" + ln.Addr().String())
	}
	return httpserve.Serve(ctx, ln, s, httpserve.Options{Grace: 10 * time.Second})
}
