package envd

import (
	"context"
	"io"

	"golang.org/x/sync/semaphore"

	"github.com/berth-sh/berth/envd/envdproto"
	"github.com/berth-sh/berth/sandbox/driver"
)

// gated is a Backend whose calls hold a slot of sem (ServerOptions.Blocking)
// while they are in system calls that block an OS thread: file system
// calls, user lookups (files too) and process starts. The Go runtime gives
// every goroutine blocked in such a call a thread of its own and makes a
// new one when none is idle; a bound on the goroutines in them bounds the
// threads. A slot is never held while waiting on the network: an upload's
// body is read, and a download's bytes are sent, without one, so that slow
// clients cannot take every slot.
type gated struct {
	b   Backend
	sem *semaphore.Weighted
}

var (
	_ Backend        = gated{}
	_ BackendProcess = gatedProcess{}
)

// do runs fn holding a slot.
func (g gated) do(ctx context.Context, fn func() error) error {
	if err := g.sem.Acquire(ctx, 1); err != nil {
		return err
	}
	defer g.sem.Release(1)
	return fn()
}

func (g gated) Path(user, raw string) (p string, err error) {
	err = g.do(context.Background(), func() error { p, err = g.b.Path(user, raw); return err })
	return p, err
}

func (g gated) Start(ctx context.Context, spec StartSpec) (bp BackendProcess, err error) {
	err = g.do(ctx, func() error { bp, err = g.b.Start(ctx, spec); return err })
	if err != nil {
		return nil, err
	}
	return gatedProcess{bp, g}, nil
}

func (g gated) Stat(ctx context.Context, p string) (e envdproto.EntryInfo, err error) {
	err = g.do(ctx, func() error { e, err = g.b.Stat(ctx, p); return err })
	return e, err
}

func (g gated) ListDir(ctx context.Context, dir string) (es []envdproto.EntryInfo, err error) {
	err = g.do(ctx, func() error { es, err = g.b.ListDir(ctx, dir); return err })
	return es, err
}

func (g gated) MakeDir(ctx context.Context, user, p string) error {
	return g.do(ctx, func() error { return g.b.MakeDir(ctx, user, p) })
}

func (g gated) Move(ctx context.Context, user, src, dst string) error {
	return g.do(ctx, func() error { return g.b.Move(ctx, user, src, dst) })
}

func (g gated) Remove(ctx context.Context, p string) error {
	return g.do(ctx, func() error { return g.b.Remove(ctx, p) })
}

// Open holds a slot for the open and for each read, seek and the close of
// the file, not between them.
func (g gated) Open(ctx context.Context, p string) (d Download, err error) {
	if err = g.do(ctx, func() error { d, err = g.b.Open(ctx, p); return err }); err != nil {
		return d, err
	}
	f := &gatedFile{ctx: ctx, g: g, f: d.ReadCloser}
	if s, ok := d.ReadCloser.(io.ReadSeeker); ok {
		d.ReadCloser = gatedSeeker{f, s}
	} else {
		d.ReadCloser = f
	}
	return d, nil
}

// Write holds a slot for all of the backend's Write but its reads of r,
// which wait on the client.
func (g gated) Write(ctx context.Context, user, p string, r io.Reader, mode *uint32) error {
	if err := g.sem.Acquire(ctx, 1); err != nil {
		return err
	}
	body := &slotFreeReader{ctx: ctx, sem: g.sem, r: r, held: true}
	err := g.b.Write(ctx, user, p, body, mode)
	if body.held {
		g.sem.Release(1)
	}
	return err
}

// slotFreeReader gives its slot back while it reads r and takes it again
// before it returns. One goroutine reads it.
type slotFreeReader struct {
	ctx  context.Context
	sem  *semaphore.Weighted
	r    io.Reader
	held bool
}

func (s *slotFreeReader) Read(b []byte) (int, error) {
	if s.held {
		s.sem.Release(1)
		s.held = false
	}
	n, err := s.r.Read(b)
	if aerr := s.sem.Acquire(s.ctx, 1); aerr != nil {
		return 0, aerr
	}
	s.held = true
	return n, err
}

// gatedFile is a Download whose reads and close hold a slot each.
type gatedFile struct {
	ctx context.Context
	g   gated
	f   io.ReadCloser
}

func (f *gatedFile) Read(b []byte) (n int, err error) {
	err = f.g.do(f.ctx, func() error { n, err = f.f.Read(b); return err })
	return n, err
}

// Close waits for a slot whatever ctx says: the file must be closed.
func (f *gatedFile) Close() error {
	return f.g.do(context.Background(), f.f.Close)
}

type gatedSeeker struct {
	*gatedFile
	s io.Seeker
}

func (f gatedSeeker) Seek(off int64, whence int) (n int64, err error) {
	err = f.g.do(f.ctx, func() error { n, err = f.s.Seek(off, whence); return err })
	return n, err
}

// gatedProcess holds a slot to signal; the rest of a process waits on
// pipes and its pidfd in the netpoller, without a thread of its own.
type gatedProcess struct {
	BackendProcess
	g gated
}

func (p gatedProcess) Signal(ctx context.Context, sig driver.Signal) error {
	return p.g.do(ctx, func() error { return p.BackendProcess.Signal(ctx, sig) })
}
