package fakeengine

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/internal/dirfd"
	"github.com/berth-sh/berth/internal/testing/busyroot"
)

// The file calls' own refusals, inside *fs.PathError values; every other
// error is a *fs.PathError with the errno the kernel gave (errors.Is with
// fs.ErrNotExist, syscall.EISDIR...).
var (
	// ErrRelative: the path is not absolute.
	ErrRelative = errors.New("path is not absolute")
	// ErrRoot: the sandbox's "/" cannot be removed.
	ErrRoot = errors.New("refusing to remove the sandbox's root")
	// ErrNotRegular: what is there is neither a regular file nor a
	// directory (a FIFO, a device), so it is not read.
	ErrNotRegular = errors.New("not a regular file")
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
	// Mode is st_mode: type, set-id, sticky and permission bits.
	Mode     uint32
	Size     int64
	ModTime  time.Time
	UID, GID uint32
	// Target is a symlink's target.
	Target string
}

// Perm is the permission bits.
func (fi FileInfo) Perm() fs.FileMode { return fs.FileMode(fi.Mode & 0o777) }

// FileMode is Mode in Go's form, as os.Lstat gives it.
func (fi FileInfo) FileMode() fs.FileMode {
	m := fi.Perm()
	for _, b := range []struct {
		st uint32
		m  fs.FileMode
	}{{unix.S_ISUID, fs.ModeSetuid}, {unix.S_ISGID, fs.ModeSetgid}, {unix.S_ISVTX, fs.ModeSticky}} {
		if fi.Mode&b.st != 0 {
			m |= b.m
		}
	}
	switch fi.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		m |= fs.ModeDevice
	}
	return m
}

func describe(p string, st unix.Stat_t) FileInfo {
	fi := FileInfo{
		Name: path.Base(p), Path: p, Type: FileOther, Mode: st.Mode, Size: st.Size,
		ModTime: time.Unix(st.Mtim.Unix()), UID: st.Uid, GID: st.Gid,
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		fi.Type = FileRegular
	case unix.S_IFDIR:
		fi.Type = FileDir
	case unix.S_IFLNK:
		fi.Type = FileSymlink
	}
	return fi
}

// open checks that the sandbox lives and opens its tree as a dirfd root,
// in which paths resolve as they do inside. p must be absolute.
func (sb *Sandbox) open(p string) (*dirfd.Root, string, error) {
	if !path.IsAbs(p) {
		return nil, "", &fs.PathError{Op: "resolve", Path: p, Err: ErrRelative}
	}
	if err := sb.live(); err != nil {
		return nil, "", err
	}
	r, err := dirfd.Open(sb.root, dirfd.InRoot)
	if err != nil {
		return nil, "", sb.live() // the tree went with the sandbox
	}
	return r, path.Clean(p), nil
}

// fstat describes the file f is open on as p.
func fstat(f *os.File, p string) (FileInfo, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return FileInfo{}, &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	return describe(p, st), nil
}

// Stat describes p: a final symlink itself, or with follow what it leads
// to inside the tree.
func (sb *Sandbox) Stat(p string, follow bool) (FileInfo, error) {
	r, p, err := sb.open(p)
	if err != nil {
		return FileInfo{}, err
	}
	defer r.Close()
	if follow {
		f, err := r.Open(p, unix.O_PATH)
		if err != nil {
			return FileInfo{}, err
		}
		defer f.Close()
		return fstat(f, p)
	}
	if p == "/" {
		st, err := r.Lstat(".")
		return describe(p, st), err
	}
	d, base, err := r.Parent(p)
	if err != nil {
		return FileInfo{}, err
	}
	defer d.Close()
	return lstat(d, base, p)
}

// lstat describes name in d as p, with a symlink's target.
func lstat(d *dirfd.Dir, name, p string) (FileInfo, error) {
	st, err := d.Lstat(name)
	if err != nil {
		return FileInfo{}, err
	}
	fi := describe(p, st)
	if fi.Type == FileSymlink {
		fi.Target, _ = d.Readlink(name)
	}
	return fi, nil
}

// List describes the entries of the directory p, sorted by name; with
// follow a symlink is described by what it leads to, and left out when
// that is missing (Daytona's daemon lists so).
func (sb *Sandbox) List(p string, follow bool) ([]FileInfo, error) {
	r, p, err := sb.open(p)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	d, err := r.OpenDir(p)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Names()
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	out := make([]FileInfo, 0, len(names))
	for _, name := range names {
		fi, err := lstat(d, name, path.Join(p, name))
		if err == nil && follow && fi.Type == FileSymlink {
			fi, err = followed(r, fi.Path)
		}
		if err == nil { // else removed since the listing, or a dangling link
			out = append(out, fi)
		}
	}
	return out, nil
}

func followed(r *dirfd.Root, p string) (FileInfo, error) {
	f, err := r.Open(p, unix.O_PATH)
	if err != nil {
		return FileInfo{}, err
	}
	defer f.Close()
	return fstat(f, p)
}

// Open opens the regular file at p (through symlinks inside the tree) for
// reading. A directory is syscall.EISDIR; anything else that is not a
// regular file is ErrNotRegular, refused before it could block a read.
func (sb *Sandbox) Open(p string) (*os.File, FileInfo, error) {
	r, p, err := sb.open(p)
	if err != nil {
		return nil, FileInfo{}, err
	}
	defer r.Close()
	f, err := r.Open(p, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, FileInfo{}, err
	}
	fi, err := fstat(f, p)
	switch {
	case err != nil:
	case fi.Type == FileDir:
		err = &fs.PathError{Op: "open", Path: p, Err: unix.EISDIR}
	case fi.Type != FileRegular:
		err = &fs.PathError{Op: "open", Path: p, Err: ErrNotRegular}
	}
	if err != nil {
		f.Close()
		return nil, FileInfo{}, err
	}
	return f, fi, nil
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
func (sb *Sandbox) WriteFile(p string, r io.Reader, mode fs.FileMode) (int64, error) {
	root, p, err := sb.open(p)
	if err != nil {
		return 0, err
	}
	defer root.Close()
	if p == "/" {
		return 0, &fs.PathError{Op: "write", Path: p, Err: unix.EISDIR}
	}
	if err := mkdirAll(root, path.Dir(p)); err != nil {
		return 0, err
	}
	f, err := root.Open(p, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL)
	if errors.Is(err, fs.ErrExist) {
		f, err = root.Open(p, unix.O_WRONLY|unix.O_TRUNC)
	} else if err == nil && mode == 0 {
		mode = 0o644
	}
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, r)
	if err == nil && mode != 0 {
		err = dirfd.SetFileAttrs(f, dirfd.Attrs{SetMode: true, Mode: uint32(mode.Perm())})
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// Mkdir makes the directory p with mode perm, whatever the umask; with
// parents its missing parents too (0755), and an existing directory is no
// error.
func (sb *Sandbox) Mkdir(p string, perm fs.FileMode, parents bool) error {
	r, p, err := sb.open(p)
	if err != nil {
		return err
	}
	defer r.Close()
	if parents {
		if err := mkdirAll(r, path.Dir(p)); err != nil || r.IsDir(p) {
			return err
		}
	}
	d, base, err := r.Parent(p)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Mkdir(base, uint32(perm.Perm())); err != nil {
		return err
	}
	return d.Chmod(base, uint32(perm.Perm()))
}

// mkdirAll makes the directory p and its parents (0755).
func mkdirAll(r *dirfd.Root, p string) error {
	d, err := r.MkdirAll(p, 0o755)
	if err != nil {
		return err
	}
	return d.Close()
}

// Remove removes p: a file or a symlink itself, an empty directory, or
// with recursive a whole tree. "/" is ErrRoot.
func (sb *Sandbox) Remove(p string, recursive bool) error {
	r, p, err := sb.open(p)
	if err != nil {
		return err
	}
	defer r.Close()
	if p == "/" {
		return &fs.PathError{Op: "remove", Path: p, Err: ErrRoot}
	}
	d, base, err := r.Parent(p)
	if err != nil {
		return err
	}
	defer d.Close()
	st, err := d.Lstat(base)
	switch {
	case err != nil:
		return err
	case recursive:
		return d.RemoveAll(base)
	case st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return d.Rmdir(base)
	}
	return d.Unlink(base)
}

// Chmod sets the mode of p; a symlink, which has none, is left alone.
func (sb *Sandbox) Chmod(p string, mode fs.FileMode) error {
	r, p, err := sb.open(p)
	if err != nil {
		return err
	}
	defer r.Close()
	d, base, err := r.Parent(p)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Chmod(base, uint32(mode.Perm()))
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

// CopyTree copies the tree into the host directory dst (a snapshot, a
// fork's seed); the sandbox cannot end while it is copied.
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
