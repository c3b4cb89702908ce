package dataplane

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"connectrpc.com/connect"

	"github.com/berth-sh/berth/envd/envdproto"
	"github.com/berth-sh/berth/sandbox"
)

// ResolvePath makes a client path absolute against home and refuses what
// could name anything outside the sandbox's tree: a ".." element or a NUL.
// The provider confines paths too; this refuses clearly and early.
func ResolvePath(raw, home string) (string, error) {
	if raw == "" {
		return "", sandbox.Errorf(sandbox.InvalidArgument, "path is required")
	}
	if strings.ContainsRune(raw, 0) {
		return "", sandbox.Errorf(sandbox.InvalidArgument, "path contains a NUL byte")
	}
	for _, el := range strings.Split(raw, "/") {
		if el == ".." {
			return "", sandbox.Errorf(sandbox.InvalidArgument, "path %q is refused: '..' could leave the sandbox's tree", raw)
		}
	}
	if !path.IsAbs(raw) {
		raw = path.Join(home, raw)
	}
	return path.Clean(raw), nil
}

func (h *Handler) resolve(raw string) (string, error) {
	p, err := ResolvePath(raw, h.opts.HomeDir)
	if err != nil {
		return "", connect.NewError(connect.CodeInvalidArgument, err)
	}
	return p, nil
}

// unix file type bits, as envd reports them in EntryInfo.mode.
const (
	sIFREG = 0o100000
	sIFDIR = 0o040000
	sIFLNK = 0o120000
)

// entryOf converts berth's FileInfo to envd's EntryInfo. Owner and group
// are not known through the sandbox API and stay empty.
func entryOf(fi sandbox.FileInfo) envdproto.EntryInfo {
	e := envdproto.EntryInfo{
		Name:         fi.Name,
		Path:         fi.Path,
		Size:         envdproto.Int64(fi.Size),
		Mode:         fi.Mode & 0o7777,
		ModifiedTime: fi.ModTime.UTC(),
	}
	if fi.Path == "/" {
		e.Name = "/"
	}
	gm := fs.FileMode(fi.Mode & 0o777)
	switch fi.Type {
	case sandbox.FileRegular:
		e.Type, e.Mode = envdproto.FileTypeFile, e.Mode|sIFREG
	case sandbox.FileDir:
		e.Type, e.Mode, gm = envdproto.FileTypeDirectory, e.Mode|sIFDIR, gm|fs.ModeDir
	case sandbox.FileSymlink:
		e.Type, e.Mode, gm = envdproto.FileTypeSymlink, e.Mode|sIFLNK, gm|fs.ModeSymlink
		t := fi.Target
		e.SymlinkTarget = &t
	default:
		e.Type = envdproto.FileTypeUnspecified
	}
	e.Permissions = gm.String()
	return e
}

func (h *Handler) stat(ctx context.Context, p string) (*envdproto.EntryInfo, error) {
	fi, err := h.sb.Stat(ctx, p)
	if err != nil {
		return nil, rpcError(err)
	}
	e := entryOf(fi)
	return &e, nil
}

func (h *Handler) handleStat(ctx context.Context, req *connect.Request[envdproto.StatRequest]) (*connect.Response[envdproto.StatResponse], error) {
	p, err := h.resolve(req.Msg.Path)
	if err != nil {
		return nil, err
	}
	e, err := h.stat(ctx, p)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&envdproto.StatResponse{Entry: e}), nil
}

func (h *Handler) handleListDir(ctx context.Context, req *connect.Request[envdproto.ListDirRequest]) (*connect.Response[envdproto.ListDirResponse], error) {
	root, err := h.resolve(req.Msg.Path)
	if err != nil {
		return nil, err
	}
	fi, err := h.sb.Stat(ctx, root)
	if err != nil {
		return nil, rpcError(err)
	}
	if fi.Type != sandbox.FileDir {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s is not a directory", root))
	}
	depth := max(int(req.Msg.Depth), 1)
	entries := []envdproto.EntryInfo{}
	var walk func(dir string, level int) error
	walk = func(dir string, level int) error {
		fis, err := h.sb.ListDir(ctx, dir)
		if err != nil {
			return err
		}
		for _, fi := range fis {
			if len(entries) >= h.opts.MaxListEntries {
				return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("more than %d entries under %s", h.opts.MaxListEntries, root))
			}
			entries = append(entries, entryOf(fi))
			if fi.Type == sandbox.FileDir && level < depth {
				if err := walk(fi.Path, level+1); err != nil && sandbox.ClassOf(err) != sandbox.Unauthenticated {
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

func (h *Handler) handleMakeDir(ctx context.Context, req *connect.Request[envdproto.MakeDirRequest]) (*connect.Response[envdproto.MakeDirResponse], error) {
	p, err := h.resolve(req.Msg.Path)
	if err != nil {
		return nil, err
	}
	if err := h.sb.MakeDir(ctx, p); err != nil {
		return nil, rpcError(err)
	}
	e, err := h.stat(ctx, p)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&envdproto.MakeDirResponse{Entry: e}), nil
}

// handleMove renames through the sandbox's own mv, since the sandbox API
// has no rename: source must exist; destination's parents are created.
func (h *Handler) handleMove(ctx context.Context, req *connect.Request[envdproto.MoveRequest]) (*connect.Response[envdproto.MoveResponse], error) {
	src, err := h.resolve(req.Msg.Source)
	if err != nil {
		return nil, err
	}
	dst, err := h.resolve(req.Msg.Destination)
	if err != nil {
		return nil, err
	}
	if _, err := h.sb.Stat(ctx, src); err != nil {
		return nil, rpcError(err)
	}
	var stderr strings.Builder
	res, err := h.sb.Run(ctx, sandbox.Command{
		Args:   []string{"sh", "-c", `mkdir -p -- "$(dirname -- "$2")" && mv -f -- "$1" "$2"`, "sh", src, dst},
		Stderr: &stderr,
	})
	if err != nil {
		return nil, rpcError(err)
	}
	if res.ExitCode != 0 {
		msg := strings.TrimSpace(stderr.String())
		if res.ExitCode == 127 {
			return nil, connect.NewError(connect.CodeUnimplemented, errors.New("move needs sh and mv in the sandbox: "+msg))
		}
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("move %s to %s: %s", src, dst, msg))
	}
	e, err := h.stat(ctx, dst)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&envdproto.MoveResponse{Entry: e}), nil
}

func (h *Handler) handleRemove(ctx context.Context, req *connect.Request[envdproto.RemoveRequest]) (*connect.Response[envdproto.RemoveResponse], error) {
	p, err := h.resolve(req.Msg.Path)
	if err != nil {
		return nil, err
	}
	if p == "/" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("refusing to remove /"))
	}
	if err := h.sb.Remove(ctx, p); err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&envdproto.RemoveResponse{}), nil
}
