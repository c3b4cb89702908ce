package dirfd

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// Mode is how paths below a Root resolve.
type Mode int

const (
	// InRoot resolves as if the root were "/": symlinks are followed inside
	// it and nothing resolves outside it (a sandbox's root seen from the
	// host).
	InRoot Mode = iota
	// Beneath refuses every symlink on a path: trees that the host fills
	// from an archive, where a link is never a way through.
	Beneath
)

func (m Mode) resolve() uint64 {
	if m == Beneath {
		return unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV
	}
	return unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV
}

// Root is a directory that paths resolve under. Its methods may be called
// from several goroutines; the Dirs they return belong to the caller.
type Root struct {
	Dir
	mode Mode
}

// Open opens the host directory dir as a Root. dir itself is the caller's
// (trusted) path: only what lies below it is resolved by mode.
func Open(dir string, mode Mode) (*Root, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	return &Root{Dir: Dir{fd: fd, path: "."}, mode: mode}, nil
}

// FromFile makes a Root of the open directory f (a duplicate of its fd;
// the caller still closes f), e.g. os.Root.Open(".").
func FromFile(f *os.File, mode Mode) (*Root, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "dup", Path: f.Name(), Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		unix.Close(fd)
		if err == nil {
			err = unix.ENOTDIR
		}
		return nil, &fs.PathError{Op: "open", Path: f.Name(), Err: err}
	}
	return &Root{Dir: Dir{fd: fd, path: "."}, mode: mode}, nil
}

// Mode returns how the root resolves paths.
func (r *Root) Mode() Mode { return r.mode }

// Clean turns p ("/a/b", "a/b/", "../a") into the relative, slash-separated
// name it has under a root ("." for the root itself). ".." cannot climb
// above the root, as inside a chroot.
func Clean(p string) string {
	p = strings.TrimPrefix(path.Clean("/"+p), "/")
	if p == "" {
		return "."
	}
	return p
}

// resolve opens p under the root with openat2. The kernel asks for a retry
// (EAGAIN) when a rename raced the lookup.
func (r *Root) resolve(p string, flags int) (int, error) {
	how := &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: r.mode.resolve()}
	if flags&unix.O_CREAT != 0 {
		how.Mode = 0o600
	}
	rel := Clean(p)
	for try := 0; ; try++ {
		fd, err := unix.Openat2(r.fd, rel, how)
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN) && try < 16:
			continue
		}
		return -1, &fs.PathError{Op: "open", Path: rel, Err: err}
	}
}

// Open opens the file at p with flags (O_CLOEXEC added). Under InRoot a
// final symlink is followed inside the root unless flags has O_NOFOLLOW.
// A FIFO or device is opened only if asked for: add O_NONBLOCK or use
// ReadFile to read what may not be a file.
func (r *Root) Open(p string, flags int) (*os.File, error) {
	fd, err := r.resolve(p, flags)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), Clean(p)), nil
}

// OpenDir opens the directory at p.
func (r *Root) OpenDir(p string) (*Dir, error) {
	fd, err := r.resolve(p, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	return &Dir{fd: fd, path: Clean(p)}, nil
}

// IsDir reports whether p resolves to a directory (under InRoot, through
// a final symlink too).
func (r *Root) IsDir(p string) bool {
	d, err := r.OpenDir(p)
	if err != nil {
		return false
	}
	d.Close()
	return true
}

// Parent opens the directory holding p and returns it with p's last
// element, which the Dir's methods act on without following it. The root
// itself has no parent: that is an error, never the root's own parent.
func (r *Root) Parent(p string) (*Dir, string, error) {
	rel := Clean(p)
	if rel == "." {
		return nil, "", &fs.PathError{Op: "parent", Path: ".", Err: unix.EINVAL}
	}
	dir, base := path.Split(rel)
	d, err := r.OpenDir(dir)
	if err != nil {
		return nil, "", err
	}
	return d, base, nil
}

// Lstat describes p without following a final symlink.
func (r *Root) Lstat(p string) (unix.Stat_t, error) {
	if Clean(p) == "." {
		var st unix.Stat_t
		if err := unix.Fstat(r.fd, &st); err != nil {
			return st, &fs.PathError{Op: "stat", Path: ".", Err: err}
		}
		return st, nil
	}
	d, base, err := r.Parent(p)
	if err != nil {
		return unix.Stat_t{}, err
	}
	defer d.Close()
	return d.Lstat(base)
}

// MkdirAll makes the directory p and its missing parents with mode perm
// (chmod'ed to it, whatever the umask) and returns it open. An existing
// element that is not a directory (or, Beneath, a symlink) is an error.
func (r *Root) MkdirAll(p string, perm uint32) (*Dir, error) {
	rel := Clean(p)
	if d, err := r.OpenDir(rel); err == nil || !errors.Is(err, unix.ENOENT) {
		return d, err
	}
	parts := strings.Split(rel, "/")
	cur, err := r.OpenDir(".")
	if err != nil {
		return nil, err
	}
	for i, name := range parts {
		prefix := strings.Join(parts[:i+1], "/")
		next, err := r.OpenDir(prefix)
		if errors.Is(err, unix.ENOENT) {
			if err = cur.Mkdir(name, perm); err == nil || errors.Is(err, fs.ErrExist) {
				created := err == nil
				if next, err = r.OpenDir(prefix); err == nil && created {
					err = next.chmodSelf(perm)
				}
			}
		}
		cur.Close()
		if err != nil {
			if next != nil {
				next.Close()
			}
			return nil, err
		}
		cur = next
	}
	return cur, nil
}

// ReadFile reads the regular file at p (under InRoot through symlinks in
// the root), at most max bytes: a longer file is an error wrapping
// ErrTooLarge, and anything but a regular file (a FIFO that would block
// the read, a device that never ends) is refused before it is read.
func (r *Root) ReadFile(p string, max int64) ([]byte, error) {
	f, err := r.Open(p, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readRegular(f, Clean(p), max)
}

// ErrTooLarge is what ReadFile's error wraps for a file over its limit.
var ErrTooLarge = errors.New("file too large")
