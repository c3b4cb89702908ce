package fakeengine

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/internal/dirfd"
	"github.com/berth-sh/berth/internal/testing/busyroot"
)

// The file calls' own refusals, inside *fs.PathError values; every other
// error is a *fs.PathError with the kernel's errno (errors.Is with
// fs.ErrNotExist, syscall.EISDIR...).
var (
	ErrRelative   = errors.New("path is not absolute")
	ErrRoot       = errors.New("refusing to remove the sandbox's root")
	ErrNotRegular = errors.New("not a regular file") // a FIFO or device is never read
)

// FileType is what a FileInfo describes.
type FileType int

const (
	FileRegular FileType = iota
	FileDir
	FileSymlink
	FileOther
)

// FileInfo describes a file of a sandbox.
type FileInfo struct {
	// Name is the last element of Path, the clean sandbox path.
	Name, Path string
	Type       FileType
	Mode       fs.FileMode // as os.Lstat gives it
	Size       int64
	ModTime    time.Time
	Sys        *syscall.Stat_t // st_mode, owner and group as the kernel has them
	Target     string          // a symlink's
}

// describe describes the file f is open on (O_PATH will do) as p.
func describe(f *os.File, p string) (FileInfo, error) {
	st, err := f.Stat()
	if err != nil {
		return FileInfo{}, err
	}
	fi := FileInfo{Name: path.Base(p), Path: p, Type: FileOther, Mode: st.Mode(), Size: st.Size(),
		ModTime: st.ModTime(), Sys: st.Sys().(*syscall.Stat_t)}
	switch m := st.Mode(); {
	case m.IsRegular():
		fi.Type = FileRegular
	case m.IsDir():
		fi.Type = FileDir
	case m&fs.ModeSymlink != 0:
		fi.Type = FileSymlink
		buf := make([]byte, unix.PathMax)
		if n, err := unix.Readlinkat(int(f.Fd()), "", buf); err == nil { // the link f is open on
			fi.Target = string(buf[:n])
		}
	}
	return fi, nil
}

// in checks that the sandbox lives and runs fn on its tree, opened as a
// dirfd root in which paths resolve as they do inside, with p clean. p
// must be absolute.
func (sb *Sandbox) in(p string, fn func(r *dirfd.Root, p string) error) error {
	if !path.IsAbs(p) {
		return &fs.PathError{Op: "resolve", Path: p, Err: ErrRelative}
	}
	if err := sb.live(); err != nil {
		return err
	}
	r, err := dirfd.Open(sb.root, dirfd.InRoot)
	if err != nil {
		return sb.live() // the tree went with the sandbox
	}
	defer r.Close()
	return fn(r, path.Clean(p))
}

// stat describes p: a final symlink itself, or with follow what it leads
// to inside the tree.
func stat(r *dirfd.Root, p string, follow bool) (FileInfo, error) {
	flags := unix.O_PATH | unix.O_NOFOLLOW
	if follow {
		flags = unix.O_PATH
	}
	f, err := r.Open(p, flags)
	if err != nil {
		return FileInfo{}, err
	}
	defer f.Close()
	return describe(f, p)
}

// Stat describes p: a final symlink itself, or with follow what it leads
// to inside the tree.
func (sb *Sandbox) Stat(p string, follow bool) (fi FileInfo, err error) {
	err = sb.in(p, func(r *dirfd.Root, p string) error {
		fi, err = stat(r, p, follow)
		return err
	})
	return fi, err
}

// List describes the entries of the directory p, sorted by name; with
// follow a symlink is described by what it leads to, and left out when
// that is missing (Daytona's daemon lists so).
func (sb *Sandbox) List(p string, follow bool) (out []FileInfo, err error) {
	err = sb.in(p, func(r *dirfd.Root, p string) error {
		d, err := r.OpenDir(p)
		if err != nil {
			return err
		}
		names, err := d.Names()
		d.Close()
		slices.Sort(names)
		for _, name := range names {
			if fi, err := stat(r, path.Join(p, name), follow); err == nil { // else gone since, or dangling
				out = append(out, fi)
			}
		}
		return err
	})
	return out, err
}

// Open opens the regular file at p (through symlinks inside the tree) for
// reading. A directory is syscall.EISDIR; anything else but a regular file
// is ErrNotRegular, refused before it could block a read.
func (sb *Sandbox) Open(p string) (f *os.File, fi FileInfo, err error) {
	err = sb.in(p, func(r *dirfd.Root, p string) error {
		if f, err = r.Open(p, unix.O_RDONLY|unix.O_NONBLOCK); err != nil {
			return err
		}
		switch fi, err = describe(f, p); {
		case err != nil:
		case fi.Type == FileDir:
			err = &fs.PathError{Op: "open", Path: p, Err: syscall.EISDIR}
		case fi.Type != FileRegular:
			err = &fs.PathError{Op: "open", Path: p, Err: ErrNotRegular}
		}
		if err != nil {
			f.Close()
			f = nil
		}
		return err
	})
	return f, fi, err
}

// ReadFile reads the whole regular file at p (Open).
func (sb *Sandbox) ReadFile(p string) ([]byte, error) {
	f, _, err := sb.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// WriteFile writes r to the file at p, making its parents (0755) and
// following a final symlink inside the tree. A new file gets mode (0644
// when mode is 0), an existing one keeps its mode unless mode is set; the
// umask has no say. It returns the bytes written.
func (sb *Sandbox) WriteFile(p string, r io.Reader, mode fs.FileMode) (n int64, err error) {
	err = sb.in(p, func(root *dirfd.Root, p string) error {
		if err := mkdirAll(root, path.Dir(p)); err != nil {
			return err
		}
		f, err := root.Open(p, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL)
		if errors.Is(err, fs.ErrExist) {
			f, err = root.Open(p, unix.O_WRONLY|unix.O_TRUNC)
		} else if err == nil && mode == 0 {
			mode = 0o644
		}
		if err != nil {
			return err
		}
		n, err = io.Copy(f, r)
		if err == nil && mode != 0 {
			err = dirfd.SetFileAttrs(f, dirfd.Attrs{SetMode: true, Mode: uint32(mode.Perm())})
		}
		return errors.Join(err, f.Close())
	})
	return n, err
}

// mkdirAll makes the directory p and its parents (0755).
func mkdirAll(r *dirfd.Root, p string) error {
	d, err := r.MkdirAll(p, 0o755)
	if err != nil {
		return err
	}
	return d.Close()
}

// Mkdir makes the directory p with mode perm, whatever the umask; with
// parents its missing parents too (0755), and an existing directory is no
// error.
func (sb *Sandbox) Mkdir(p string, perm fs.FileMode, parents bool) error {
	return sb.in(p, func(r *dirfd.Root, p string) error {
		if parents {
			if err := mkdirAll(r, path.Dir(p)); err != nil || r.IsDir(p) {
				return err
			}
		}
		return inParent(r, p, func(d *dirfd.Dir, name string) error {
			if err := d.Mkdir(name, uint32(perm.Perm())); err != nil {
				return err
			}
			return d.Chmod(name, uint32(perm.Perm()))
		})
	})
}

// inParent runs fn on the directory holding p and p's last element, which
// fn acts on without following it.
func inParent(r *dirfd.Root, p string, fn func(d *dirfd.Dir, name string) error) error {
	d, name, err := r.Parent(p)
	if err != nil {
		return err
	}
	defer d.Close()
	return fn(d, name)
}

// Remove removes p: a file or a symlink itself, an empty directory, or
// with recursive a whole tree. "/" is ErrRoot.
func (sb *Sandbox) Remove(p string, recursive bool) error {
	return sb.in(p, func(r *dirfd.Root, p string) error {
		if p == "/" {
			return &fs.PathError{Op: "remove", Path: p, Err: ErrRoot}
		}
		return inParent(r, p, func(d *dirfd.Dir, name string) error {
			st, err := d.Lstat(name)
			switch {
			case err != nil:
				return err
			case recursive:
				return d.RemoveAll(name)
			case st.Mode&unix.S_IFMT == unix.S_IFDIR:
				return d.Rmdir(name)
			}
			return d.Unlink(name)
		})
	})
}

// Chmod sets the mode of p; a symlink, which has none, is left alone.
func (sb *Sandbox) Chmod(p string, mode fs.FileMode) error {
	return sb.in(p, func(r *dirfd.Root, p string) error {
		return inParent(r, p, func(d *dirfd.Dir, name string) error { return d.Chmod(name, uint32(mode.Perm())) })
	})
}

// OSRoot opens the tree as an os.Root, for hosttar's extraction and
// archiving.
func (sb *Sandbox) OSRoot() (*os.Root, error) {
	if err := sb.live(); err != nil {
		return nil, err
	}
	r, err := os.OpenRoot(sb.root)
	if err != nil {
		return nil, sb.live()
	}
	return r, nil
}

// CopyTree copies the tree into the host directory dst (a snapshot); the
// sandbox cannot end while it is copied.
func (sb *Sandbox) CopyTree(dst string) error {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.ended != Running {
		return errors.New("sandbox " + sb.ID + " has ended")
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	return busyroot.Copy(sb.root, dst)
}
