package dirfd

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Dir is an open directory (an O_PATH fd). Its methods act on one name in
// it, never following that name if it is a symlink.
type Dir struct {
	fd   int
	path string // its path under the root, for errors
}

// Close releases the fd.
func (d *Dir) Close() error { return unix.Close(d.fd) }

// Path is the directory's path under its root ("." for the root).
func (d *Dir) Path() string { return d.path }

func (d *Dir) err(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: path.Join(d.path, name), Err: err}
}

// Lstat describes name without following it.
func (d *Dir) Lstat(name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return st, d.err("lstat", name, err)
	}
	return st, nil
}

// Mkdir makes the directory name with mode perm (less the umask).
func (d *Dir) Mkdir(name string, perm uint32) error {
	if err := unix.Mkdirat(d.fd, name, perm); err != nil {
		return d.err("mkdir", name, err)
	}
	return nil
}

// OpenDir opens the directory name; a symlink there is refused.
func (d *Dir) OpenDir(name string) (*Dir, error) {
	fd, err := unix.Openat(d.fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, d.err("open", name, err)
	}
	return &Dir{fd: fd, path: path.Join(d.path, name)}, nil
}

// Open opens name with flags, O_NOFOLLOW and O_CLOEXEC added: a symlink
// there is refused (ELOOP), not followed.
func (d *Dir) Open(name string, flags int) (*os.File, error) {
	fd, err := unix.Openat(d.fd, name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, d.err("open", name, err)
	}
	return os.NewFile(uintptr(fd), path.Join(d.path, name)), nil
}

// Create makes the regular file name, which must not exist (O_EXCL: a name
// raced in meanwhile is an error, never a file to write through), open for
// writing with mode perm (less the umask; set the mode after writing).
func (d *Dir) Create(name string, perm uint32) (*os.File, error) {
	fd, err := unix.Openat(d.fd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	if err != nil {
		return nil, d.err("create", name, err)
	}
	return os.NewFile(uintptr(fd), path.Join(d.path, name)), nil
}

// Symlink makes name a symlink to target.
func (d *Dir) Symlink(target, name string) error {
	if err := unix.Symlinkat(target, d.fd, name); err != nil {
		return d.err("symlink", name, err)
	}
	return nil
}

// Link makes name a hard link to oldName in old. A symlink at oldName is
// linked itself, never followed.
func (d *Dir) Link(name string, old *Dir, oldName string) error {
	if err := unix.Linkat(old.fd, oldName, d.fd, name, 0); err != nil {
		return d.err("link", name, err)
	}
	return nil
}

// Mknod makes the node name (a FIFO, or the 0/0 character device that is
// an overlayfs whiteout).
func (d *Dir) Mknod(name string, mode uint32, dev int) error {
	if err := unix.Mknodat(d.fd, name, mode, dev); err != nil {
		return d.err("mknod", name, err)
	}
	return nil
}

// Readlink returns the target of the symlink name.
func (d *Dir) Readlink(name string) (string, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Readlinkat(d.fd, name, buf)
		if err != nil {
			return "", d.err("readlink", name, err)
		}
		if n < len(buf) {
			return string(buf[:n]), nil
		}
		if len(buf) >= unix.PathMax {
			return "", d.err("readlink", name, unix.ENAMETOOLONG)
		}
		buf = make([]byte, 2*len(buf))
	}
}

// Names returns the names in the directory, in no order.
func (d *Dir) Names() ([]string, error) {
	f, err := d.Open(".", unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, d.err("readdir", "", err)
	}
	return names, nil
}

// ListXattrs returns the names of the extended attributes of name itself
// (a symlink's own, never its target's), sorted; none where the file
// system has none.
func (d *Dir) ListXattrs(name string) ([]string, error) {
	p, err := d.procPath(name)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 1024)
	for {
		n, err := unix.Llistxattr(p, buf)
		if errors.Is(err, unix.ERANGE) && len(buf) < maxXattr {
			buf = make([]byte, len(buf)*4)
			continue
		}
		if errors.Is(err, unix.ENOTSUP) {
			return nil, nil
		}
		if err != nil {
			return nil, d.err("listxattr", name, err)
		}
		var names []string
		for _, s := range strings.Split(string(buf[:n]), "\x00") {
			if s != "" {
				names = append(names, s)
			}
		}
		sort.Strings(names)
		return names, nil
	}
}

// GetXattr returns the value of the extended attribute attr of name
// itself; an absent one is an error wrapping unix.ENODATA.
func (d *Dir) GetXattr(name, attr string) ([]byte, error) {
	p, err := d.procPath(name)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 256)
	for {
		n, err := unix.Lgetxattr(p, attr, buf)
		if errors.Is(err, unix.ERANGE) && len(buf) < maxXattr {
			buf = make([]byte, len(buf)*4)
			continue
		}
		if err != nil {
			return nil, d.err("getxattr", name, err)
		}
		return buf[:n], nil
	}
}

// maxXattr bounds the buffers of ListXattrs and GetXattr (the kernel's
// own limit on a value is 64 KiB).
const maxXattr = 1 << 20

// procPath names name in the directory through the directory's fd: the
// xattr calls take a path, and /proc/self/fd/N is exactly this directory,
// whatever has been renamed or swapped for a symlink on the way to it
// since it was opened; the l* calls then leave name itself unfollowed.
func (d *Dir) procPath(name string) (string, error) {
	if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
		return "", d.err("resolve", name, unix.EINVAL)
	}
	return "/proc/self/fd/" + strconv.Itoa(d.fd) + "/" + name, nil
}

// Unlink removes the non-directory name.
func (d *Dir) Unlink(name string) error {
	if err := unix.Unlinkat(d.fd, name, 0); err != nil {
		return d.err("remove", name, err)
	}
	return nil
}

// Rmdir removes the empty directory name.
func (d *Dir) Rmdir(name string) error {
	if err := unix.Unlinkat(d.fd, name, unix.AT_REMOVEDIR); err != nil {
		return d.err("remove", name, err)
	}
	return nil
}

// ErrIsDir is what Clear's error wraps when a directory is in the way.
var ErrIsDir = errors.New("a directory is in the way")

// Clear removes whatever non-directory is at name, so that a new entry can
// take the name instead of writing through what was there. Nothing there
// is success; a directory is an error wrapping ErrIsDir (a file does not
// replace a directory, as in tar and Docker).
func (d *Dir) Clear(name string) error {
	st, err := d.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return d.err("replace", name, ErrIsDir)
	}
	return d.Unlink(name)
}

// RemoveAll removes name and, if it is a directory, everything below it,
// through fds all the way down: a symlink met on the way is removed, never
// followed. Nothing there is success.
func (d *Dir) RemoveAll(name string) error {
	st, err := d.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return d.Unlink(name)
	}
	f, err := d.Open(name, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return err
	}
	sub := &Dir{fd: int(f.Fd()), path: path.Join(d.path, name)}
	names, err := f.Readdirnames(-1)
	for _, n := range names {
		if err != nil {
			break
		}
		err = sub.RemoveAll(n)
	}
	f.Close()
	if err != nil {
		return err
	}
	if err := unix.Unlinkat(d.fd, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return d.err("remove", name, err)
	}
	return nil
}

// Chown sets the owner of name itself (a symlink's own owner).
func (d *Dir) Chown(name string, uid, gid int) error {
	if err := unix.Fchownat(d.fd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return d.err("chown", name, err)
	}
	return nil
}

// Chmod sets the mode (permission, set-id and sticky bits) of name. A
// symlink has no mode of its own and is left alone: chmod on a link's name
// would change its target, which is exactly what must never happen.
func (d *Dir) Chmod(name string, mode uint32) error {
	fd, err := unix.Openat(d.fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return d.err("chmod", name, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return d.err("chmod", name, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return nil
	}
	if err := chmodFd(fd, mode); err != nil {
		return d.err("chmod", name, err)
	}
	return nil
}

// chmodSelf sets the directory's own mode.
func (d *Dir) chmodSelf(mode uint32) error {
	if err := chmodFd(d.fd, mode); err != nil {
		return d.err("chmod", "", err)
	}
	return nil
}

// chmodFd changes the mode of the inode an fd (O_PATH included) refers to.
// fchmod refuses O_PATH fds; the fd's /proc/self/fd entry names exactly
// that inode, and it is not a symlink (the callers checked), so chmod of
// it changes nothing else.
func chmodFd(fd int, mode uint32) error {
	err := unix.Fchmod(fd, mode)
	if !errors.Is(err, unix.EBADF) {
		return err
	}
	return unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), mode)
}

// Chtimes sets the access and modification times of name itself; a zero
// atime is mtime, a zero mtime leaves both alone.
func (d *Dir) Chtimes(name string, atime, mtime time.Time) error {
	if mtime.IsZero() {
		return nil
	}
	if atime.IsZero() {
		atime = mtime
	}
	ts := []unix.Timespec{unix.NsecToTimespec(atime.UnixNano()), unix.NsecToTimespec(mtime.UnixNano())}
	if err := unix.UtimesNanoAt(d.fd, name, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return d.err("chtimes", name, err)
	}
	return nil
}

// Attrs are what SetAttrs gives a name.
type Attrs struct {
	// Chown sets UID and GID as the owner.
	Chown    bool
	UID, GID int
	// SetMode sets Mode (permission, set-id and sticky bits).
	SetMode bool
	Mode    uint32
	// MTime, when not zero, is the modification time; ATime the access
	// time (zero: MTime).
	ATime, MTime time.Time
}

// SetAttrs applies a's owner, then mode (chown clears set-id bits), then
// times, to name itself.
func (d *Dir) SetAttrs(name string, a Attrs) error {
	if a.Chown {
		if err := d.Chown(name, a.UID, a.GID); err != nil {
			return err
		}
	}
	if a.SetMode {
		if err := d.Chmod(name, a.Mode); err != nil {
			return err
		}
	}
	return d.Chtimes(name, a.ATime, a.MTime)
}

// SetFileAttrs is SetAttrs on a file opened for writing (owner, mode,
// times through the fd itself).
func SetFileAttrs(f *os.File, a Attrs) error {
	if a.Chown {
		if err := f.Chown(a.UID, a.GID); err != nil {
			return err
		}
	}
	if a.SetMode {
		if err := unix.Fchmod(int(f.Fd()), a.Mode); err != nil {
			return &fs.PathError{Op: "chmod", Path: f.Name(), Err: err}
		}
	}
	if a.MTime.IsZero() {
		return nil
	}
	at := a.ATime
	if at.IsZero() {
		at = a.MTime
	}
	tv := []unix.Timeval{unix.NsecToTimeval(at.UnixNano()), unix.NsecToTimeval(a.MTime.UnixNano())}
	if err := unix.Futimes(int(f.Fd()), tv); err != nil {
		return &fs.PathError{Op: "chtimes", Path: f.Name(), Err: err}
	}
	return nil
}

// readRegular reads the open file f (opened O_NONBLOCK, so that opening a
// FIFO did not wait), refusing anything but a regular file and more than
// max bytes.
func readRegular(f *os.File, name string, max int64) ([]byte, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("not a regular file (mode %#o)", st.Mode)}
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	if int64(len(b)) > max {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w: over %d bytes", ErrTooLarge, max)}
	}
	return b, nil
}
