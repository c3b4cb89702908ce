package local

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/sandbox/hosttar"
	"github.com/berth-sh/berth/sandbox/types"
)

// buildRoot writes into a build sandbox's root file system from the host,
// for COPY, ADD and WORKDIR. Every path is resolved by openat2 with
// RESOLVE_IN_ROOT: symlinks the image or an earlier RUN planted resolve as
// they would inside the sandbox (an absolute one from the sandbox's root),
// and nothing resolves outside it, even if a process still running in the
// sandbox swaps a directory for a link in the middle of a copy. The last
// element of a path is never followed: files are created with O_EXCL and
// O_NOFOLLOW after removing what was there, and attributes are set
// through the new file's own descriptor.
type buildRoot struct{ fd int }

func openBuildRoot(dir string) (*buildRoot, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open build root: %w", err)
	}
	return &buildRoot{fd: fd}, nil
}

func (r *buildRoot) Close() error { return unix.Close(r.fd) }

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

// rel turns an absolute sandbox path into openat2's relative name.
func rel(p string) string {
	p = strings.TrimPrefix(path.Clean("/"+p), "/")
	if p == "" {
		return "."
	}
	return p
}

// open resolves p inside the root.
func (r *buildRoot) open(p string, flags int) (int, error) {
	how := &unix.OpenHow{
		Flags:   uint64(flags | unix.O_CLOEXEC),
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	}
	for try := 0; ; try++ {
		fd, err := unix.Openat2(r.fd, rel(p), how)
		if errors.Is(err, unix.EAGAIN) && try < 8 {
			continue // a rename raced the lookup; the kernel asks to retry
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return fd, err
	}
}

// isDir reports whether p resolves to a directory.
func (r *buildRoot) isDir(p string) bool {
	fd, err := r.open(p, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// parent opens the directory holding p, which must exist, and returns it
// with p's last element.
func (r *buildRoot) parent(p string) (int, string, error) {
	p = path.Clean("/" + p)
	if p == "/" {
		return -1, "", types.Errorf(types.InvalidArgument, "cannot replace /")
	}
	dir, base := path.Split(p)
	fd, err := r.open(dir, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return -1, "", fmt.Errorf("%s: %w", dir, err)
	}
	return fd, base, nil
}

// mkdirAll makes p and its missing parents. Parents are made as root with
// mode 0755; p itself, when made here, gets o's owner and o.modeOr(0755).
func (r *buildRoot) mkdirAll(p string, o owner) error {
	p = path.Clean("/" + p)
	if r.isDir(p) {
		return nil
	}
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i := range parts {
		cur := "/" + strings.Join(parts[:i+1], "/")
		if r.isDir(cur) {
			continue
		}
		attrs := owner{mode: 0o755, hasMode: true}
		if i == len(parts)-1 {
			attrs = owner{uid: o.uid, gid: o.gid, mode: o.modeOr(0o755), hasMode: true}
		}
		if err := r.dir(cur, attrs, time.Time{}); err != nil {
			return err
		}
	}
	return nil
}

// dir makes the directory p (its parent exists) or keeps the one there,
// and gives it o's owner and mode; mtime is set unless zero.
func (r *buildRoot) dir(p string, o owner, mtime time.Time) error {
	pfd, base, err := r.parent(p)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	switch err := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); {
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR:
	case err == nil:
		if err := unix.Unlinkat(pfd, base, 0); err != nil {
			return fmt.Errorf("replace %s: %w", p, err)
		}
		fallthrough
	default:
		if err := unix.Mkdirat(pfd, base, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("mkdir %s: %w", p, err)
		}
	}
	fd, err := unix.Openat(pfd, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	defer unix.Close(fd)
	return setAttrs(fd, p, o, mtime)
}

// setAttrs applies owner, then mode (chown clears set-id bits), then times.
func setAttrs(fd int, p string, o owner, mtime time.Time) error {
	if err := unix.Fchown(fd, o.uid, o.gid); err != nil {
		return fmt.Errorf("chown %s: %w", p, err)
	}
	if err := unix.Fchmod(fd, o.mode); err != nil {
		return fmt.Errorf("chmod %s: %w", p, err)
	}
	if !mtime.IsZero() {
		tv := unix.NsecToTimeval(mtime.UnixNano())
		if err := unix.Futimes(fd, []unix.Timeval{tv, tv}); err != nil {
			return fmt.Errorf("set times of %s: %w", p, err)
		}
	}
	return nil
}

// clearName removes a non-directory at base in pfd; a directory is an error
// (a file does not replace a directory, as in Docker).
func clearName(pfd int, base, p string) error {
	var st unix.Stat_t
	err := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return types.Errorf(types.InvalidArgument, "cannot replace the directory %s with a file", p)
	}
	if err := unix.Unlinkat(pfd, base, 0); err != nil {
		return fmt.Errorf("replace %s: %w", p, err)
	}
	return nil
}

// replaceable opens p's parent and clears the name p so that a new entry
// can take it (see clearName); the caller closes the fd.
func (r *buildRoot) replaceable(p string) (pfd int, base string, err error) {
	if pfd, base, err = r.parent(p); err != nil {
		return -1, "", err
	}
	if err := clearName(pfd, base, p); err != nil {
		unix.Close(pfd)
		return -1, "", err
	}
	return pfd, base, nil
}

// file writes r as the file p (its parent exists) with o's owner and mode.
func (r *buildRoot) file(p string, src io.Reader, o owner, mtime time.Time) error {
	pfd, base, err := r.replaceable(p)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	fd, err := unix.Openat(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", p, err)
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	if _, err := io.Copy(f, src); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return setAttrs(fd, p, o, mtime)
}

// symlink makes p a symlink to target, owned as o says.
func (r *buildRoot) symlink(p, target string, o owner, mtime time.Time) error {
	pfd, base, err := r.replaceable(p)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if err := unix.Symlinkat(target, pfd, base); err != nil {
		return fmt.Errorf("symlink %s: %w", p, err)
	}
	if err := unix.Fchownat(pfd, base, o.uid, o.gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("chown %s: %w", p, err)
	}
	if !mtime.IsZero() {
		ts := unix.NsecToTimespec(mtime.UnixNano())
		if err := unix.UtimesNanoAt(pfd, base, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("set times of %s: %w", p, err)
		}
	}
	return nil
}

// link makes p a hard link to the existing non-directory old.
func (r *buildRoot) link(p, old string) error {
	ofd, obase, err := r.parent(old)
	if err != nil {
		return err
	}
	defer unix.Close(ofd)
	pfd, base, err := r.replaceable(p)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if err := unix.Linkat(ofd, obase, pfd, base, 0); err != nil {
		return fmt.Errorf("link %s to %s: %w", p, old, err)
	}
	return nil
}

// fifo makes p a named pipe.
func (r *buildRoot) fifo(p string, o owner) error {
	pfd, base, err := r.replaceable(p)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if err := unix.Mknodat(pfd, base, unix.S_IFIFO|0o600, 0); err != nil {
		return fmt.Errorf("mkfifo %s: %w", p, err)
	}
	if err := unix.Fchownat(pfd, base, o.uid, o.gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("chown %s: %w", p, err)
	}
	return unix.Fchmodat(pfd, base, o.mode&0o777, 0)
}

// extract unpacks a tar stream into the directory dest, keeping the
// archive's owners, modes and times, as ADD does. Names are taken below
// dest ("..", absolute names and NULs are refused); links inside the
// archive may point anywhere, since every later path still resolves
// inside the sandbox's root. Device nodes are skipped.
func (r *buildRoot) extract(ctx context.Context, dest string, tr *tar.Reader, hdr *tar.Header) error {
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
				return types.Errorf(types.InvalidArgument, "read the archive: %v", err)
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
		if err := r.mkdirAll(path.Dir(p), owner{mode: 0o755, hasMode: true}); err != nil {
			return err
		}
		o := owner{uid: hdr.Uid, gid: hdr.Gid, mode: tarMode(hdr.Mode), hasMode: true}
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = r.dir(p, o, time.Time{})
		case tar.TypeReg:
			err = r.file(p, tr, o, hdr.ModTime)
		case tar.TypeSymlink:
			err = r.symlink(p, hdr.Linkname, o, hdr.ModTime)
		case tar.TypeLink:
			old, lerr := hosttar.CleanName(hdr.Linkname)
			if lerr != nil {
				return lerr
			}
			err = r.link(p, path.Join(dest, old))
		case tar.TypeFifo:
			err = r.fifo(p, o)
		}
		if err != nil {
			return err
		}
	}
}

// tarMode keeps permission and set-id/sticky bits of a tar mode.
func tarMode(m int64) uint32 { return uint32(m) & 0o7777 }
