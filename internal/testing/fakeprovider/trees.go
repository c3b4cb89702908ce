package fakeprovider

import (
	"context"
	"io"

	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/hosttar"
)

// treeSandbox is a sandbox that moves trees in one call (Options.NativeTrees).
type treeSandbox struct{ *sandbox }

var (
	_ driver.TreeUploader   = (*treeSandbox)(nil)
	_ driver.TreeDownloader = (*treeSandbox)(nil)
)

// UploadTar unpacks into dir with hosttar.Extract, which refuses escaping
// names and links on its own, whatever the caller checked.
func (s *treeSandbox) UploadTar(ctx context.Context, dir string, r io.Reader) error {
	name, err := rel(dir)
	if err != nil {
		return err
	}
	root, _, err := s.openRoot()
	if err != nil {
		return err
	}
	defer root.Close()
	if err := root.MkdirAll(name, 0o755); err != nil {
		return mapErr(err)
	}
	sub, err := root.OpenRoot(name)
	if err != nil {
		return mapErr(err)
	}
	defer sub.Close()
	return hosttar.Extract(ctx, sub, r)
}

// DownloadTar archives the path into a pipe as it is read.
func (s *treeSandbox) DownloadTar(ctx context.Context, p string) (io.ReadCloser, error) {
	name, err := rel(p)
	if err != nil {
		return nil, err
	}
	root, _, err := s.openRoot()
	if err != nil {
		return nil, err
	}
	if _, err := root.Lstat(name); err != nil {
		root.Close()
		return nil, mapErr(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer root.Close()
		pw.CloseWithError(hosttar.Write(ctx, pw, root, name))
	}()
	return &download{pr: pr, cancel: cancel, done: done}, nil
}

// download stops the archiving goroutine on Close and waits for it.
type download struct {
	pr     *io.PipeReader
	cancel context.CancelFunc
	done   chan struct{}
}

func (d *download) Read(b []byte) (int, error) { return d.pr.Read(b) }

func (d *download) Close() error {
	d.cancel()
	err := d.pr.Close()
	<-d.done
	return err
}

// minimalSandbox hides every optional method of a sandbox (Options.Minimal):
// only driver.Sandbox's are promoted through the embedded interface.
type minimalSandbox struct{ driver.Sandbox }

// Exec hides the process's optional methods too.
func (s minimalSandbox) Exec(ctx context.Context, c driver.Command) (driver.Process, error) {
	p, err := s.Sandbox.Exec(ctx, c)
	if err != nil {
		return nil, err
	}
	return minimalProcess{p}, nil
}

// minimalProcess is a process without Signal.
type minimalProcess struct{ driver.Process }
