package k8s

import (
	"bytes"
	"context"
	"io"
	"strings"

	"github.com/berth-sh/berth/agent/podagent"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

var (
	_ driver.TreeUploader   = (*sandboxHandle)(nil)
	_ driver.TreeDownloader = (*sandboxHandle)(nil)
)

// UploadTar runs the pod's own berth binary (`k8s-agent --untar`) with the
// stream on its stdin: one exec per tree, links kept, on any image.
func (h *sandboxHandle) UploadTar(ctx context.Context, dir string, r io.Reader) error {
	var stderr capped
	pr, err := h.Exec(ctx, driver.Command{
		Args:   []string{podagent.BinaryPath, "k8s-agent", "--untar", dir},
		Stdin:  r,
		Stderr: &stderr,
	})
	if err != nil {
		return err
	}
	code, err := pr.Wait(ctx)
	if err != nil {
		return err
	}
	if code != 0 {
		return treeError("upload", dir, code, stderr.String())
	}
	return nil
}

// DownloadTar checks the path with Stat (so that a missing one is NotFound
// before any byte), then streams `k8s-agent --tar` from the pod.
func (h *sandboxHandle) DownloadTar(ctx context.Context, path string) (io.ReadCloser, error) {
	if _, err := h.Stat(ctx, path); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	var stderr capped
	proc, err := h.Exec(ctx, driver.Command{
		Args:   []string{podagent.BinaryPath, "k8s-agent", "--tar", path},
		Stdout: pw,
		Stderr: &stderr,
	})
	if err != nil {
		cancel()
		return nil, err
	}
	go func() {
		code, err := proc.Wait(ctx)
		if err == nil && code != 0 {
			err = treeError("download", path, code, stderr.String())
		}
		pw.CloseWithError(err)
	}()
	return &cancelReader{ReadCloser: pr, cancel: cancel}, nil
}

func treeError(op, path string, code int, stderr string) error {
	msg := strings.TrimSpace(stderr)
	c := errdefs.Unknown
	switch {
	case strings.Contains(msg, "not found"), strings.Contains(msg, "no such file"):
		c = errdefs.NotFound
	case strings.Contains(msg, "invalid"), strings.Contains(msg, "not inside"), strings.Contains(msg, "escapes"):
		c = errdefs.InvalidArgument
	}
	return errdefs.Errorf(c, "k8s %s %s: the agent exited %d: %s", op, path, code, msg)
}

// cancelReader stops the remote tar when the reader is closed early.
type cancelReader struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelReader) Close() error {
	c.cancel()
	return c.ReadCloser.Close()
}

// capped keeps the first 4 KiB written to it (the agent's error text)
// and drops the rest.
type capped struct{ bytes.Buffer }

func (c *capped) Write(p []byte) (int, error) {
	if room := 4096 - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
