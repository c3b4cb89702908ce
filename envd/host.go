package envd

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/berth-sh/berth/envd/envdproto"
	"github.com/berth-sh/berth/internal/dirfd"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// host is the Backend over this machine: internal/hostproc, real paths,
// and users from the passwd database, switched to with credentials when
// the server runs as root. It is what the agent serves inside a sandbox.
type host struct {
	opts  ServerOptions
	users *users
}

var _ Backend = (*host)(nil)

func newHost(opts ServerOptions) *host { return &host{opts: opts, users: newUsers()} }

// Path resolves raw for user: relative paths start at the user's home.
func (h *host) Path(user, raw string) (string, error) {
	c, err := h.resolveCaller(user)
	if err != nil {
		return "", err
	}
	return h.resolvePath(raw, c)
}

func (h *host) Stat(_ context.Context, p string) (envdproto.EntryInfo, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return envdproto.EntryInfo{}, err
	}
	return h.entryInfo(p, fi), nil
}

func (h *host) ListDir(_ context.Context, dir string) ([]envdproto.EntryInfo, error) {
	des, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return nil, err
	}
	out := make([]envdproto.EntryInfo, 0, len(des))
	for _, de := range des {
		info, err := de.Info()
		if err != nil {
			continue // removed while listing
		}
		out = append(out, h.entryInfo(filepath.Join(dir, de.Name()), info))
	}
	return out, nil
}

func (h *host) MakeDir(_ context.Context, user, p string) error {
	if fi, err := os.Lstat(p); err == nil {
		if fi.IsDir() {
			return errdefs.Errorf(errdefs.AlreadyExists, "directory %s already exists", p)
		}
		return errdefs.Errorf(errdefs.AlreadyExists, "%s already exists and is not a directory", p)
	}
	c, err := h.resolveCaller(user)
	if err != nil {
		return err
	}
	return mkdirAllOwned(p, c.acct)
}

func (h *host) Move(_ context.Context, user, src, dst string) error {
	c, err := h.resolveCaller(user)
	if err != nil {
		return err
	}
	if err := mkdirAllOwned(filepath.Dir(dst), c.acct); err != nil {
		return err
	}
	return os.Rename(src, dst)
}

func (h *host) Remove(_ context.Context, p string) error {
	if _, err := os.Lstat(p); err != nil {
		return err // RemoveAll would call a missing path success
	}
	return os.RemoveAll(p)
}

func (h *host) Open(_ context.Context, p string) (Download, error) {
	// O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return Download{}, err
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
	case fi.IsDir():
		err = errdefs.Errorf(errdefs.InvalidArgument, "%s is a directory", p)
	case !fi.Mode().IsRegular():
		// A FIFO or device would block or never end.
		err = errdefs.Errorf(errdefs.InvalidArgument, "%s is not a regular file", p)
	}
	if err != nil {
		_ = f.Close()
		return Download{}, err
	}
	return Download{ReadCloser: f, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

func (h *host) Write(_ context.Context, user, p string, r io.Reader, mode *uint32) error {
	c, err := h.resolveCaller(user)
	if err != nil {
		return err
	}
	var fm *os.FileMode
	if mode != nil {
		m := unixToFileMode(os.FileMode(*mode))
		fm = &m
	}
	return writeFileAtomic(p, r, fm, c.acct)
}

// entryInfo describes path from an Lstat result.
func (h *host) entryInfo(path string, fi fs.FileInfo) envdproto.EntryInfo {
	e := envdproto.EntryInfo{
		Name:         fi.Name(),
		Path:         path,
		Size:         envdproto.Int64(fi.Size()),
		Mode:         dirfd.UnixMode(fi.Mode()),
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
		e.Owner = h.users.ownerName(st.Uid)
		e.Group = h.users.groupName(st.Gid)
	}
	return e
}

// unixToFileMode accepts either numbering for setuid/setgid/sticky.
func unixToFileMode(m os.FileMode) os.FileMode {
	out := m & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky)
	if m&0o4000 != 0 {
		out |= os.ModeSetuid
	}
	if m&0o2000 != 0 {
		out |= os.ModeSetgid
	}
	if m&0o1000 != 0 {
		out |= os.ModeSticky
	}
	return out
}

// writeFileAtomic writes body to p through a temporary file in the same
// directory and renames it over p, so that a failed upload leaves the old
// file whole and a planted symlink at p is replaced, not followed. New
// files get mode or 0644; an existing file keeps its mode and owner unless
// mode or a user says otherwise.
func writeFileAtomic(p string, body io.Reader, mode *os.FileMode, a *account) error {
	dir := filepath.Dir(p)
	if err := mkdirAllOwned(dir, a); err != nil {
		return err
	}
	perm := os.FileMode(0o644)
	uid, gid := -1, -1
	if fi, err := os.Lstat(p); err == nil {
		if fi.IsDir() {
			return fmt.Errorf("%s is a directory: %w", p, syscall.EISDIR)
		}
		if fi.Mode().IsRegular() {
			perm = fi.Mode() & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky)
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				uid, gid = int(st.Uid), int(st.Gid)
			}
		}
	}
	if mode != nil {
		perm = *mode
	}
	if needsCredential(a) {
		uid, gid = int(a.uid), int(a.gid)
	}
	f, err := os.CreateTemp(dir, ".berth-upload-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if _, err := io.Copy(f, body); err != nil {
		return err
	}
	if uid >= 0 && (uid != os.Geteuid() || gid != os.Getegid()) {
		if err := f.Chown(uid, gid); err != nil {
			return err
		}
	}
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		return err
	}
	ok = true
	return nil
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
