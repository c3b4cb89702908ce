package dataplane

import (
	"context"
	"time"

	"connectrpc.com/connect"

	"github.com/berth-sh/berth/envd/envdproto"
	"github.com/berth-sh/berth/sandbox"
)

// watchPoll is how often WatchDir looks again: the sandbox API has no
// change notification, so changes are found by comparing listings.
const watchPoll = 200 * time.Millisecond

type watchState struct {
	size  int64
	mtime time.Time
	typ   sandbox.FileType
}

// snapshot lists dir (recursively when asked), bounded like ListDir.
func (h *Handler) snapshot(ctx context.Context, dir string, recursive bool) (map[string]watchState, error) {
	out := map[string]watchState{}
	var walk func(d string) error
	walk = func(d string) error {
		fis, err := h.sb.ListDir(ctx, d)
		if err != nil {
			return err
		}
		for _, fi := range fis {
			if len(out) >= h.opts.MaxListEntries {
				return sandbox.Errorf(sandbox.ResourceExhausted, "more than %d entries under %s", h.opts.MaxListEntries, dir)
			}
			out[fi.Path] = watchState{size: fi.Size, mtime: fi.ModTime, typ: fi.Type}
			if recursive && fi.Type == sandbox.FileDir {
				if err := walk(fi.Path); err != nil && sandbox.ClassOf(err) != sandbox.NotFound {
					return err
				}
			}
		}
		return nil
	}
	return out, walk(dir)
}

// handleWatchDir reports creations, writes and removals under a directory
// by polling its listing.
func (h *Handler) handleWatchDir(ctx context.Context, req *connect.Request[envdproto.WatchDirRequest], out *connect.ServerStream[envdproto.WatchDirResponse]) error {
	dir, err := h.resolve(req.Msg.Path)
	if err != nil {
		return err
	}
	prev, err := h.snapshot(ctx, dir, req.Msg.Recursive)
	if err != nil {
		return rpcError(err)
	}
	if err := out.Send(&envdproto.WatchDirResponse{Start: &struct{}{}}); err != nil {
		return err
	}
	keepalive := keepaliveOf(req.Header())
	lastSent := time.Now()
	tick := time.NewTicker(watchPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-h.ctx.Done():
			return connect.NewError(connect.CodeUnavailable, errSandboxGone)
		case <-tick.C:
		}
		cur, err := h.snapshot(ctx, dir, req.Msg.Recursive)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return rpcError(err)
		}
		send := func(p string, t envdproto.EventType) error {
			name := p[len(dir):]
			if len(name) > 0 && name[0] == '/' {
				name = name[1:]
			}
			lastSent = time.Now()
			return out.Send(&envdproto.WatchDirResponse{Filesystem: &envdproto.FilesystemEvent{Name: name, Type: t}})
		}
		for p, st := range cur {
			old, ok := prev[p]
			switch {
			case !ok:
				err = send(p, envdproto.EventTypeCreate)
			case old.typ == sandbox.FileRegular && (old.size != st.size || !old.mtime.Equal(st.mtime)):
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
