package envd

import (
	"context"
	"errors"
	"math"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/berth-sh/berth/envd/envdproto"
)

// watchPoll is how often WatchDir looks again. Backends have no change
// notification in common (the sandbox API has none), so changes are found
// by comparing listings; a watch costs nothing while nobody watches.
const watchPoll = 200 * time.Millisecond

type watchState struct {
	size  envdproto.Int64
	mtime time.Time
	typ   envdproto.FileType
}

// snapshot lists dir (the whole tree when recursive), bounded like ListDir.
func (s *Server) snapshot(ctx context.Context, dir string, recursive bool) (map[string]watchState, error) {
	depth := 1
	if recursive {
		depth = math.MaxInt
	}
	out := map[string]watchState{}
	err := s.walk(ctx, dir, depth, func(e envdproto.EntryInfo) {
		out[e.Path] = watchState{size: e.Size, mtime: e.ModifiedTime, typ: e.Type}
	})
	return out, err
}

var errClosed = errors.New("the envd server is closing (sandbox deleted or server stopped)")

// handleWatchDir reports creations, writes and removals under a directory
// by polling its listing.
func (s *Server) handleWatchDir(ctx context.Context, req *connect.Request[envdproto.WatchDirRequest], out *connect.ServerStream[envdproto.WatchDirResponse]) error {
	_, dir, err := s.callerPath(req.Header(), req.Msg.Path)
	if err != nil {
		return err
	}
	prev, err := s.snapshot(ctx, dir, req.Msg.Recursive)
	if err != nil {
		return rpcError(err)
	}
	if err := out.Send(&envdproto.WatchDirResponse{Start: &struct{}{}}); err != nil {
		return err
	}
	keepalive := keepaliveOf(req.Header())
	lastSent := time.Now()
	send := func(p string, t envdproto.EventType) error {
		name := strings.TrimPrefix(strings.TrimPrefix(p, dir), "/")
		lastSent = time.Now()
		return out.Send(&envdproto.WatchDirResponse{Filesystem: &envdproto.FilesystemEvent{Name: name, Type: t}})
	}
	tick := time.NewTicker(watchPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.ctx.Done():
			return connect.NewError(connect.CodeUnavailable, errClosed)
		case <-tick.C:
		}
		cur, err := s.snapshot(ctx, dir, req.Msg.Recursive)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return rpcError(err)
		}
		for p, st := range cur {
			old, ok := prev[p]
			switch {
			case !ok:
				err = send(p, envdproto.EventTypeCreate)
			case old.typ == envdproto.FileTypeFile && (old.size != st.size || !old.mtime.Equal(st.mtime)):
				err = send(p, envdproto.EventTypeWrite)
			}
			if err != nil {
				return err
			}
		}
		for p := range prev {
			if _, ok := cur[p]; !ok {
				if err := send(p, envdproto.EventTypeRemove); err != nil {
					return err
				}
			}
		}
		prev = cur
		if keepalive > 0 && time.Since(lastSent) >= keepalive {
			lastSent = time.Now()
			if err := out.Send(&envdproto.WatchDirResponse{Keepalive: &envdproto.KeepAlive{}}); err != nil {
				return err
			}
		}
	}
}
