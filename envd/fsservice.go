package envd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"syscall"

	"connectrpc.com/connect"

	"github.com/berth-sh/berth/envd/envdproto"
)

// entryInfo describes path from an Lstat result.
func (s *Server) entryInfo(path string, fi fs.FileInfo) envdproto.EntryInfo {
	e := envdproto.EntryInfo{
		Name:         fi.Name(),
		Path:         path,
		Size:         envdproto.Int64(fi.Size()),
		Mode:         unixMode(fi.Mode()),
		Permissions:  fi.Mode().String(),
		ModifiedTime: fi.ModTime().UTC(),
	}
	if path == "/" {
		e.Name = "/"
	}
	switch {
	case fi.Mode().IsRegular():
		e.Type = envdproto.FileTypeFile
	case fi.IsDir():
		e.Type = envdproto.FileTypeDirectory
	case fi.Mode()&fs.ModeSymlink != 0:
		e.Type = envdproto.FileTypeSymlink
		if t, err := os.Readlink(path); err == nil {
			e.SymlinkTarget = &t
		}
	default:
		e.Type = envdproto.FileTypeUnspecified
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.Owner = s.users.ownerName(st.Uid)
		e.Group = s.users.groupName(st.Gid)
	}
	return e
}

// unixMode is the permission bits in the numbering of chmod(2).
func unixMode(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		u |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		u |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		u |= 0o1000
	}
	return u
}

// callerPath resolves a request path for the caller named in the header.
func (s *Server) callerPath(h http.Header, p string) (caller, string, error) {
	c, err := s.resolveCaller(userFromHeader(h))
	if err != nil {
		return c, "", connect.NewError(connect.CodeInvalidArgument, err)
	}
	abs, err := s.resolvePath(p, c)
	if err != nil {
		return c, "", connect.NewError(connect.CodeInvalidArgument, err)
	}
	return c, abs, nil
}

func (s *Server) handleStat(_ context.Context, req *connect.Request[envdproto.StatRequest]) (*connect.Response[envdproto.StatResponse], error) {
	_, p, err := s.callerPath(req.Header(), req.Msg.Path)
	if err != nil {
		return nil, err
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, rpcError(err)
	}
	e := s.entryInfo(p, fi)
	return connect.NewResponse(&envdproto.StatResponse{Entry: &e}), nil
}

func (s *Server) handleListDir(_ context.Context, req *connect.Request[envdproto.ListDirRequest]) (*connect.Response[envdproto.ListDirResponse], error) {
	_, root, err := s.callerPath(req.Header(), req.Msg.Path)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(root)
	if err != nil {
		return nil, rpcError(err)
	}
	if !fi.IsDir() {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s is not a directory", root))
	}
	depth := max(int(req.Msg.Depth), 1)
	entries := []envdproto.EntryInfo{}
	var walk func(dir string, level int) error
	walk = func(dir string, level int) error {
		des, err := os.ReadDir(dir) // sorted by name
		if err != nil {
			return err
		}
		for _, de := range des {
			if len(entries) >= s.opts.MaxListEntries {
				return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("more than %d entries under %s", s.opts.MaxListEntries, root))
			}
			p := filepath.Join(dir, de.Name())
			info, err := de.Info()
			if err != nil {
				continue // removed while listing
			}
			entries = append(entries, s.entryInfo(p, info))
			if de.IsDir() && level < depth {
				if err := walk(p, level+1); err != nil && !errors.Is(err, fs.ErrPermission) {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(root, 1); err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&envdproto.ListDirResponse{Entries: entries}), nil
}

func (s *Server) handleMakeDir(_ context.Context, req *connect.Request[envdproto.MakeDirRequest]) (*connect.Response[envdproto.MakeDirResponse], error) {
	c, p, err := s.callerPath(req.Header(), req.Msg.Path)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(p); err == nil {
		if fi.IsDir() {
			return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("directory %s already exists", p))
		}
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("%s already exists and is not a directory", p))
	}
	if err := mkdirAllOwned(p, c.acct); err != nil {
		return nil, rpcError(err)
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, rpcError(err)
	}
	e := s.entryInfo(p, fi)
	return connect.NewResponse(&envdproto.MakeDirResponse{Entry: &e}), nil
}

func (s *Server) handleMove(_ context.Context, req *connect.Request[envdproto.MoveRequest]) (*connect.Response[envdproto.MoveResponse], error) {
	c, src, err := s.callerPath(req.Header(), req.Msg.Source)
	if err != nil {
		return nil, err
	}
	dst, err := s.resolvePath(req.Msg.Destination, c)
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	if _, err := os.Lstat(src); err != nil {
		return nil, rpcError(err)
	}
	if err := mkdirAllOwned(filepath.Dir(dst), c.acct); err != nil {
		return nil, rpcError(err)
	}
	if err := os.Rename(src, dst); err != nil {
		return nil, rpcError(err)
	}
	fi, err := os.Lstat(dst)
	if err != nil {
		return nil, rpcError(err)
	}
	e := s.entryInfo(dst, fi)
	return connect.NewResponse(&envdproto.MoveResponse{Entry: &e}), nil
}

func (s *Server) handleRemove(_ context.Context, req *connect.Request[envdproto.RemoveRequest]) (*connect.Response[envdproto.RemoveResponse], error) {
	_, p, err := s.callerPath(req.Header(), req.Msg.Path)
	if err != nil {
		return nil, err
	}
	if p == "/" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("refusing to remove /"))
	}
	if _, err := os.Lstat(p); err != nil {
		return nil, rpcError(err)
	}
	if err := os.RemoveAll(p); err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&envdproto.RemoveResponse{}), nil
}

func (s *Server) handleWatchDir(context.Context, *connect.Request[envdproto.WatchDirRequest], *connect.ServerStream[envdproto.WatchDirResponse]) error {
	return connect.NewError(connect.CodeUnimplemented, errors.New("watching directories is not supported yet"))
}

// mkdirAllOwned is os.MkdirAll that gives the directories it creates to a
// (when the server acts for another user).
func mkdirAllOwned(dir string, a *account) error {
	var created []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || d == "/" || d == "." {
			break
		}
		created = append(created, d)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if needsCredential(a) {
		for _, d := range created {
			if err := os.Lchown(d, int(a.uid), int(a.gid)); err != nil {
				return err
			}
		}
	}
	return nil
}
