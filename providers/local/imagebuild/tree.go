package imagebuild

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/internal/dirfd"
	"github.com/berth-sh/berth/sandbox/errdefs"
	"github.com/berth-sh/berth/sandbox/hosttar"
)

// tree writes into a build sandbox's root file system from the host, for
// COPY, ADD and WORKDIR, through package dirfd: every path resolves inside
// the root as it would inside the sandbox (RESOLVE_IN_ROOT), and the last
// element of a path is never followed. Files are created with O_EXCL and
// O_NOFOLLOW after removing what was there; owners, modes and times are set
// without following a link.
type tree struct{ root *dirfd.Root }

func openTree(dir string) (*tree, error) {
	r, err := dirfd.Open(dir, dirfd.InRoot)
	if err != nil {
		return nil, fmt.Errorf("open build root: %w", err)
	}
	return &tree{root: r}, nil
}

func (t *tree) Close() error { return t.root.Close() }

// created, when set (tests), runs right after a name is made and before
// its attributes are set: where a process racing the build would swap the
// name for a symlink.
var created func(p string)

func race(p string) {
	if created != nil {
		created(p)
	}
}

// owner is who owns what a step writes, and the mode it forces (0 keeps
// the source's).
type owner struct {
	uid, gid int
	mode     uint32
	hasMode  bool
}

func (o owner) modeOr(m uint32) uint32 {
	if o.hasMode {
		return o.mode
	}
	return m
}

// attrs are o's owner and mode, with mtime unless zero.
func (o owner) attrs(mtime time.Time) dirfd.Attrs {
	return dirfd.Attrs{Chown: true, UID: o.uid, GID: o.gid, SetMode: o.hasMode, Mode: o.mode, MTime: mtime}
}

// isDir reports whether p resolves to a directory.
func (t *tree) isDir(p string) bool { return t.root.IsDir(p) }

// parent opens the directory holding p, which must exist, and returns it
// with p's last element.
func (t *tree) parent(p string) (*dirfd.Dir, string, error) {
	if dirfd.Clean(p) == "." {
		return nil, "", errdefs.Errorf(errdefs.InvalidArgument, "cannot replace /")
	}
	d, base, err := t.root.Parent(p)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", path.Dir(path.Clean("/"+p)), err)
	}
	return d, base, nil
}

// mkdirAll makes p and its missing parents. Parents are made as root with
// mode 0755; p itself, when made here, gets o's owner and o.modeOr(0755).
func (t *tree) mkdirAll(p string, o owner) error {
	if t.isDir(p) {
		return nil
	}
	d, err := t.root.MkdirAll(p, 0o755)
	if err != nil {
		return fmt.Errorf("mkdir %s: %w", p, err)
	}
	d.Close()
	race(p)
	pd, base, err := t.parent(p)
	if err != nil {
		return err
	}
	defer pd.Close()
	o.mode, o.hasMode = o.modeOr(0o755), true
	return pd.SetAttrs(base, o.attrs(time.Time{}))
}

// dir makes the directory p (its parent exists) or keeps the one there,
// and gives it o's owner and mode; mtime is set unless zero.
func (t *tree) dir(p string, o owner, mtime time.Time) error {
	pd, base, err := t.parent(p)
	if err != nil {
		return err
	}
	defer pd.Close()
	st, err := pd.Lstat(base)
	switch {
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR:
	case err == nil:
		if err := pd.Unlink(base); err != nil {
			return fmt.Errorf("replace %s: %w", p, err)
		}
		fallthrough
	default:
		if err := pd.Mkdir(base, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("mkdir %s: %w", p, err)
		}
	}
	race(p)
	return pd.SetAttrs(base, o.attrs(mtime))
}

// replaceable opens p's parent and clears the name so that a new entry can
// take it (a directory there is an error: a file does not replace a
// directory, as in Docker); the caller closes the Dir.
func (t *tree) replaceable(p string) (*dirfd.Dir, string, error) {
	pd, base, err := t.parent(p)
	if err != nil {
		return nil, "", err
	}
	if err := pd.Clear(base); err != nil {
		pd.Close()
		if errors.Is(err, dirfd.ErrIsDir) {
			return nil, "", errdefs.Errorf(errdefs.InvalidArgument, "cannot replace the directory %s with a file", p)
		}
		return nil, "", fmt.Errorf("replace %s: %w", p, err)
	}
	return pd, base, nil
}

// file writes src as the file p (its parent exists) with o's owner and
// mode, set on the new file's own descriptor.
func (t *tree) file(p string, src io.Reader, o owner, mtime time.Time) error {
	pd, base, err := t.replaceable(p)
	if err != nil {
		return err
	}
	defer pd.Close()
	f, err := pd.Create(base, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", p, err)
	}
	defer f.Close()
	if _, err := io.Copy(f, src); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	race(p)
	return dirfd.SetFileAttrs(f, o.attrs(mtime))
}

// symlink makes p a symlink to target, owned as o says.
func (t *tree) symlink(p, target string, o owner, mtime time.Time) error {
	pd, base, err := t.replaceable(p)
	if err != nil {
		return err
	}
	defer pd.Close()
	if err := pd.Symlink(target, base); err != nil {
		return fmt.Errorf("symlink %s: %w", p, err)
	}
	race(p)
	o.hasMode = false // a link has no mode of its own
	return pd.SetAttrs(base, o.attrs(mtime))
}

// link makes p a hard link to the existing non-directory old.
func (t *tree) link(p, old string) error {
	od, obase, err := t.parent(old)
	if err != nil {
		return err
	}
	defer od.Close()
	pd, base, err := t.replaceable(p)
	if err != nil {
		return err
	}
	defer pd.Close()
	if err := pd.Link(base, od, obase); err != nil {
		return fmt.Errorf("link %s to %s: %w", p, old, err)
	}
	return nil
}

// fifo makes p a named pipe with o's owner and mode. The mode is set on
// the node itself, never through whatever a racing process put at p.
func (t *tree) fifo(p string, o owner) error {
	pd, base, err := t.replaceable(p)
	if err != nil {
		return err
	}
	defer pd.Close()
	if err := pd.Mknod(base, unix.S_IFIFO|0o600, 0); err != nil {
		return fmt.Errorf("mkfifo %s: %w", p, err)
	}
	race(p)
	o.mode &= 0o777
	return pd.SetAttrs(base, o.attrs(time.Time{}))
}

// extract unpacks a tar stream into the directory dest, keeping the
// archive's owners, modes and times, as ADD does. Names are taken below
// dest ("..", absolute names and NULs are refused); links inside the
// archive may point anywhere, since every later path still resolves
// inside the sandbox's root. Device nodes are skipped.
func (t *tree) extract(ctx context.Context, dest string, tr *tar.Reader, hdr *tar.Header) error {
	for ; ; hdr = nil {
		if err := ctx.Err(); err != nil {
			return err
		}
		if hdr == nil {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return errdefs.Errorf(errdefs.InvalidArgument, "read the archive: %v", err)
			}
			hdr = h
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader || hdr.Typeflag == tar.TypeXHeader {
			continue
		}
		name, err := hosttar.CleanName(hdr.Name)
		if err != nil {
			return err
		}
		p := path.Join(dest, name)
		if name == "." {
			continue
		}
		if err := t.mkdirAll(path.Dir(p), owner{mode: 0o755, hasMode: true}); err != nil {
			return err
		}
		o := owner{uid: hdr.Uid, gid: hdr.Gid, mode: tarMode(hdr.Mode), hasMode: true}
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = t.dir(p, o, time.Time{})
		case tar.TypeReg:
			err = t.file(p, tr, o, hdr.ModTime)
		case tar.TypeSymlink:
			err = t.symlink(p, hdr.Linkname, o, hdr.ModTime)
		case tar.TypeLink:
			old, lerr := hosttar.CleanName(hdr.Linkname)
			if lerr != nil {
				return lerr
			}
			err = t.link(p, path.Join(dest, old))
		case tar.TypeFifo:
			err = t.fifo(p, o)
		}
		if err != nil {
			return err
		}
	}
}

// tarMode keeps permission and set-id/sticky bits of a tar mode.
func tarMode(m int64) uint32 { return uint32(m) & 0o7777 }
