package fakeprovider

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"time"

	"github.com/berth-sh/berth/internal/testing/fakeengine"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// sandbox is a handle; it holds no resources, and every call finds the
// sandbox ended if another handle deleted it.
type sandbox struct {
	p  *provider
	sb *fakeengine.Sandbox
}

var _ driver.Sandbox = (*sandbox)(nil)

func (s *sandbox) ID() string   { return s.sb.ID }
func (s *sandbox) Close() error { return nil }

// live is nil while the sandbox lives, NotFound once it has ended.
func (s *sandbox) live() error {
	_, err := s.p.eng.Get(s.sb.ID)
	return err
}

// mapErr classes the engine's errors by their errno; what has none
// (escapes, relative paths, a FIFO to read) is InvalidArgument.
func mapErr(err error) error {
	return errdefs.Classify(errdefs.InvalidArgument, errdefs.ClassifyErrno(err))
}

func (s *sandbox) WriteFile(ctx context.Context, p string, r io.Reader, mode uint32) error {
	_, err := s.sb.WriteFile(p, ctxReader{ctx, r}, fs.FileMode(mode)&fs.ModePerm)
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
	f, _, err := s.sb.Open(p)
	if err != nil {
		return nil, mapErr(err)
	}
	return f, nil
}

func (s *sandbox) Stat(_ context.Context, p string) (driver.FileInfo, error) {
	fi, err := s.sb.Stat(p, false)
	if err != nil {
		return driver.FileInfo{}, mapErr(err)
	}
	return info(fi), nil
}

var fileTypes = map[fakeengine.FileType]driver.FileType{
	fakeengine.FileRegular: driver.FileRegular, fakeengine.FileDir: driver.FileDir,
	fakeengine.FileSymlink: driver.FileSymlink, fakeengine.FileOther: driver.FileOther,
}

func info(fi fakeengine.FileInfo) driver.FileInfo {
	return driver.FileInfo{
		Name: fi.Name, Path: fi.Path, Type: fileTypes[fi.Type], Size: fi.Size,
		Mode: uint32(fi.Mode.Perm()), ModTime: fi.ModTime, Target: fi.Target,
	}
}

func (s *sandbox) ListDir(_ context.Context, p string) ([]driver.FileInfo, error) {
	fis, err := s.sb.List(p, false)
	if err != nil {
		return nil, mapErr(err)
	}
	out := make([]driver.FileInfo, 0, len(fis))
	for _, fi := range fis {
		out = append(out, info(fi))
	}
	return out, nil
}

func (s *sandbox) MakeDir(_ context.Context, p string) error {
	if _, err := s.sb.Stat(p, false); err == nil {
		return errdefs.Errorf(errdefs.AlreadyExists, "%s already exists", p)
	}
	return mapErr(s.sb.Mkdir(p, 0o755, true))
}

func (s *sandbox) Remove(_ context.Context, p string) error {
	return mapErr(s.sb.Remove(p, true))
}

func (s *sandbox) SetTimeout(_ context.Context, d time.Duration) error {
	if err := s.live(); err != nil {
		return fmt.Errorf("set timeout: %w", err)
	}
	s.sb.SetDeadline(time.Now().Add(d))
	return nil
}

func (s *sandbox) Delete(ctx context.Context) error { return s.p.Delete(ctx, s.sb.ID) }
