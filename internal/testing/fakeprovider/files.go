package fakeprovider

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// sandbox is a handle; it holds no resources, so every call re-checks that
// the sandbox is still there (another handle may have deleted it).
type sandbox struct {
	p   *provider
	id  string
	dir string
}

var _ driver.Sandbox = (*sandbox)(nil)

func (s *sandbox) ID() string   { return s.id }
func (s *sandbox) Close() error { return nil }

// openRoot checks the sandbox is alive and opens its file tree.
func (s *sandbox) openRoot() (*os.Root, meta, error) {
	m, err := liveMeta(s.dir)
	if err != nil {
		return nil, m, err
	}
	r, err := os.OpenRoot(filepath.Join(s.dir, "root"))
	if err != nil {
		return nil, m, errdefs.Errorf(errdefs.NotFound, "sandbox %s does not exist", s.id)
	}
	return r, m, nil
}

// rel maps an absolute sandbox path to a name inside the root.
func rel(p string) (string, error) {
	if !path.IsAbs(p) {
		return "", errdefs.Errorf(errdefs.InvalidArgument, "path %q is not absolute", p)
	}
	r := strings.TrimPrefix(path.Clean(p), "/")
	if r == "" {
		return ".", nil
	}
	return r, nil
}

// mapErr classes host errors; os.Root's refusals (escapes, absolute links)
// are InvalidArgument.
func mapErr(err error) error {
	return errdefs.Classify(errdefs.InvalidArgument, errdefs.ClassifyErrno(err))
}

func (s *sandbox) WriteFile(ctx context.Context, p string, r io.Reader, mode uint32) error {
	name, err := rel(p)
	if err != nil {
		return err
	}
	root, _, err := s.openRoot()
	if err != nil {
		return err
	}
	defer root.Close()
	if dir := path.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return mapErr(err)
		}
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return mapErr(err)
	}
	_, err = io.Copy(f, ctxReader{ctx, r})
	if err == nil {
		// Chmod rather than the open mode: the umask must not decide.
		err = f.Chmod(fs.FileMode(mode) & fs.ModePerm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return mapErr(err)
}

// ctxReader stops a long copy when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}

func (s *sandbox) ReadFile(_ context.Context, p string) (io.ReadCloser, error) {
	name, err := rel(p)
	if err != nil {
		return nil, err
	}
	root, _, err := s.openRoot()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Open(name)
	if err != nil {
		return nil, mapErr(err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = errdefs.Errorf(errdefs.InvalidArgument, "%s is not a regular file", p)
	}
	if err != nil {
		f.Close()
		return nil, mapErr(err)
	}
	return f, nil
}

func (s *sandbox) Stat(_ context.Context, p string) (driver.FileInfo, error) {
	name, err := rel(p)
	if err != nil {
		return driver.FileInfo{}, err
	}
	root, _, err := s.openRoot()
	if err != nil {
		return driver.FileInfo{}, err
	}
	defer root.Close()
	fi, err := root.Lstat(name)
	if err != nil {
		return driver.FileInfo{}, mapErr(err)
	}
	return info(root, name, path.Clean(p), fi), nil
}

func info(root *os.Root, name, p string, fi fs.FileInfo) driver.FileInfo {
	out := driver.FileInfo{
		Name: path.Base(p), Path: p, Size: fi.Size(),
		Mode: uint32(fi.Mode().Perm()), ModTime: fi.ModTime(),
	}
	switch {
	case fi.IsDir():
		out.Type = driver.FileDir
	case fi.Mode().IsRegular():
		out.Type = driver.FileRegular
	case fi.Mode()&fs.ModeSymlink != 0:
		out.Type = driver.FileSymlink
		out.Target, _ = root.Readlink(name)
	default:
		out.Type = driver.FileOther
	}
	return out
}

func (s *sandbox) ListDir(_ context.Context, p string) ([]driver.FileInfo, error) {
	name, err := rel(p)
	if err != nil {
		return nil, err
	}
	root, _, err := s.openRoot()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Open(name)
	if err != nil {
		return nil, mapErr(err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, mapErr(err)
	} else if !fi.IsDir() {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "%s is not a directory", p)
	}
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, mapErr(err)
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	out := make([]driver.FileInfo, 0, len(entries))
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			continue // removed since the listing
		}
		out = append(out, info(root, path.Join(name, e.Name()), path.Join(path.Clean(p), e.Name()), fi))
	}
	return out, nil
}

func (s *sandbox) MakeDir(_ context.Context, p string) error {
	name, err := rel(p)
	if err != nil {
		return err
	}
	root, _, err := s.openRoot()
	if err != nil {
		return err
	}
	defer root.Close()
	if _, err := root.Lstat(name); err == nil {
		return errdefs.Errorf(errdefs.AlreadyExists, "%s already exists", p)
	}
	return mapErr(root.MkdirAll(name, 0o755))
}

func (s *sandbox) Remove(_ context.Context, p string) error {
	name, err := rel(p)
	if err != nil {
		return err
	}
	if name == "." {
		return errdefs.Errorf(errdefs.InvalidArgument, "refusing to remove the sandbox's root")
	}
	root, _, err := s.openRoot()
	if err != nil {
		return err
	}
	defer root.Close()
	if _, err := root.Lstat(name); err != nil {
		return mapErr(err)
	}
	return mapErr(root.RemoveAll(name))
}

func (s *sandbox) SetTimeout(_ context.Context, d time.Duration) error {
	metaMu.Lock()
	defer metaMu.Unlock()
	m, err := liveMeta(s.dir)
	if err != nil {
		return err
	}
	m.ExpiresAt = time.Now().Add(d)
	if err := writeMeta(s.dir, m); err != nil {
		return fmt.Errorf("set timeout: %w", err)
	}
	schedule(s.dir, m.ExpiresAt)
	return nil
}

func (s *sandbox) Delete(ctx context.Context) error { return s.p.Delete(ctx, s.id) }
