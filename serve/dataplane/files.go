package dataplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	"connectrpc.com/connect"

	"github.com/berth-sh/berth/envd"
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

func (b *backend) Stat(ctx context.Context, p string) (envdproto.EntryInfo, error) {
	fi, err := b.sb.Stat(ctx, p)
	if err != nil {
		return envdproto.EntryInfo{}, err
	}
	return entryOf(fi), nil
}

func (b *backend) ListDir(ctx context.Context, dir string) ([]envdproto.EntryInfo, error) {
	fis, err := b.sb.ListDir(ctx, dir)
	if err != nil {
		return nil, err
	}
	out := make([]envdproto.EntryInfo, len(fis))
	for i, fi := range fis {
		out[i] = entryOf(fi)
	}
	return out, nil
}

func (b *backend) MakeDir(ctx context.Context, _, p string) error { return b.sb.MakeDir(ctx, p) }

func (b *backend) Remove(ctx context.Context, p string) error { return b.sb.Remove(ctx, p) }

// Move renames through the sandbox's own mv, since the sandbox API has no
// rename.
func (b *backend) Move(ctx context.Context, _, src, dst string) error {
	var stderr strings.Builder
	res, err := b.sb.Run(ctx, sandbox.Command{
		Args:   []string{"sh", "-c", `mkdir -p -- "$(dirname -- "$2")" && mv -f -- "$1" "$2"`, "sh", src, dst},
		Stderr: &stderr,
	})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		msg := strings.TrimSpace(stderr.String())
		if res.ExitCode == 127 {
			return connect.NewError(connect.CodeUnimplemented, errors.New("move needs sh and mv in the sandbox: "+msg))
		}
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("move %s to %s: %s", src, dst, msg))
	}
	return nil
}

func (b *backend) Open(ctx context.Context, p string) (envd.Download, error) {
	fi, err := b.sb.Stat(ctx, p)
	if err != nil {
		return envd.Download{}, err
	}
	if fi.Type == sandbox.FileDir {
		return envd.Download{}, sandbox.Errorf(sandbox.InvalidArgument, "%s is a directory", p)
	}
	rc, err := b.sb.Open(ctx, p)
	if err != nil {
		return envd.Download{}, err
	}
	d := envd.Download{ReadCloser: rc, Size: -1, ModTime: fi.ModTime}
	if fi.Type == sandbox.FileRegular {
		d.Size = fi.Size
	}
	return d, nil
}

// Write needs plain permission bits: the sandbox API sets no setuid,
// setgid or sticky bit, and cannot keep an existing file's mode.
func (b *backend) Write(ctx context.Context, _, p string, r io.Reader, mode *uint32) error {
	m := fs.FileMode(0o644)
	if mode != nil {
		if *mode > 0o777 || *mode == 0 {
			return sandbox.Errorf(sandbox.InvalidArgument, "mode %o is not permission bits the sandbox API can set", *mode)
		}
		m = fs.FileMode(*mode)
	}
	return b.sb.WriteFrom(ctx, p, r, m)
}
