package fakeprovider

import (
	"context"
	"io"
	"path"
	"strings"

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
	if err := s.sb.Mkdir(dir, 0o755, true); err != nil {
		return mapErr(err)
	}
	root, err := s.sb.OSRoot()
	if err != nil {
		return err
	}
	defer root.Close()
	sub, err := root.OpenRoot(rel(dir))
	if err != nil {
		return mapErr(err)
	}
	defer sub.Close()
	return hosttar.Extract(ctx, sub, r)
}

// DownloadTar archives the path into a pipe as it is read.
func (s *treeSandbox) DownloadTar(ctx context.Context, p string) (io.ReadCloser, error) {
	if _, err := s.sb.Stat(p, false); err != nil {
		return nil, mapErr(err)
	}
	root, err := s.sb.OSRoot()
	if err != nil {
		return nil, err
	}
	return hosttar.Stream(ctx, func(ctx context.Context, w io.Writer) error {
		defer root.Close()
		return hosttar.Write(ctx, w, root, rel(p))
	}), nil
}

// rel is the name of the absolute sandbox path p under an os.Root of the
// tree.
func rel(p string) string {
	if name := strings.TrimPrefix(path.Clean(p), "/"); name != "" {
		return name
	}
	return "."
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
