package envd

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"connectrpc.com/connect"

	"github.com/berth-sh/berth/envd/envdproto"
)

// callerPath resolves a request path for the caller named in the header.
func (s *Server) callerPath(h http.Header, raw string) (user, p string, err error) {
	user = userFromHeader(h)
	p, err = s.b.Path(user, raw)
	if err != nil {
		return "", "", connect.NewError(connect.CodeInvalidArgument, err)
	}
	return user, p, nil
}

// entry is Stat as an RPC answer.
func (s *Server) entry(ctx context.Context, p string) (*envdproto.EntryInfo, error) {
	e, err := s.b.Stat(ctx, p)
	if err != nil {
		return nil, rpcError(err)
	}
	return &e, nil
}

func (s *Server) handleStat(ctx context.Context, req *connect.Request[envdproto.StatRequest]) (*connect.Response[envdproto.StatResponse], error) {
	_, p, err := s.callerPath(req.Header(), req.Msg.Path)
	if err != nil {
		return nil, err
	}
	e, err := s.entry(ctx, p)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&envdproto.StatResponse{Entry: e}), nil
}

// walk lists dir and, down to depth levels, the directories under it,
// bounded by MaxListEntries. Subdirectories the backend may not read are
// left out; the root's own errors are returned.
func (s *Server) walk(ctx context.Context, root string, depth int, visit func(envdproto.EntryInfo)) error {
	n := 0
	var walk func(dir string, level int) error
	walk = func(dir string, level int) error {
		ents, err := s.b.ListDir(ctx, dir)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if n >= s.opts.MaxListEntries {
				return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("more than %d entries under %s", s.opts.MaxListEntries, root))
			}
			n++
			visit(e)
			if e.Type == envdproto.FileTypeDirectory && level < depth {
				if err := walk(e.Path, level+1); err != nil && !skippable(err) {
					return err
				}
			}
		}
		return nil
	}
	return walk(root, 1)
}

// skippable is a subdirectory that went away or may not be read while a
// tree was being walked.
func skippable(err error) bool {
	c := codeOf(err)
	return c == connect.CodePermissionDenied || c == connect.CodeNotFound
}

func (s *Server) handleListDir(ctx context.Context, req *connect.Request[envdproto.ListDirRequest]) (*connect.Response[envdproto.ListDirResponse], error) {
	_, root, err := s.callerPath(req.Header(), req.Msg.Path)
	if err != nil {
		return nil, err
	}
	e, err := s.entry(ctx, root)
	if err != nil {
		return nil, err
	}
	// A symlink is listed if it leads to a directory; ListDir says if not.
	if e.Type != envdproto.FileTypeDirectory && e.Type != envdproto.FileTypeSymlink {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s is not a directory", root))
	}
	entries := []envdproto.EntryInfo{}
	if err := s.walk(ctx, root, max(int(req.Msg.Depth), 1), func(e envdproto.EntryInfo) { entries = append(entries, e) }); err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&envdproto.ListDirResponse{Entries: entries}), nil
}

func (s *Server) handleMakeDir(ctx context.Context, req *connect.Request[envdproto.MakeDirRequest]) (*connect.Response[envdproto.MakeDirResponse], error) {
	user, p, err := s.callerPath(req.Header(), req.Msg.Path)
	if err != nil {
		return nil, err
	}
	if err := s.b.MakeDir(ctx, user, p); err != nil {
		return nil, rpcError(err)
	}
	e, err := s.entry(ctx, p)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&envdproto.MakeDirResponse{Entry: e}), nil
}

func (s *Server) handleMove(ctx context.Context, req *connect.Request[envdproto.MoveRequest]) (*connect.Response[envdproto.MoveResponse], error) {
	user, src, err := s.callerPath(req.Header(), req.Msg.Source)
	if err != nil {
		return nil, err
	}
	dst, err := s.b.Path(user, req.Msg.Destination)
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	// A missing source must not leave the destination's parents behind.
	if _, err := s.entry(ctx, src); err != nil {
		return nil, err
	}
	if err := s.b.Move(ctx, user, src, dst); err != nil {
		return nil, rpcError(err)
	}
	e, err := s.entry(ctx, dst)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&envdproto.MoveResponse{Entry: e}), nil
}

func (s *Server) handleRemove(ctx context.Context, req *connect.Request[envdproto.RemoveRequest]) (*connect.Response[envdproto.RemoveResponse], error) {
	_, p, err := s.callerPath(req.Header(), req.Msg.Path)
	if err != nil {
		return nil, err
	}
	if p == "/" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("refusing to remove /"))
	}
	if err := s.b.Remove(ctx, p); err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&envdproto.RemoveResponse{}), nil
}
