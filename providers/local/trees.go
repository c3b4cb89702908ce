package local

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"sync"

	"github.com/berth-sh/berth/providers/local/agentinit"
	"github.com/berth-sh/berth/sandbox/types"
)

// Trees move as one tar stream through the berth binary that is mounted in
// every sandbox (`berth agent tar-x|tar-c`), so they need no tar in the
// image and run as the calling user, inside the sandbox's own view of its
// files: a symlink planted in the sandbox leads nowhere outside it.

// helper is the argv of `berth agent VERB ARG` inside the sandbox.
func (h *sandboxHandle) helper(verb, arg string) []string {
	argv := h.agentArgv
	if len(argv) == 0 {
		argv = []string{agentinit.BinaryPath}
	}
	return append(slices.Clone(argv), "agent", verb, arg)
}

// maxHelperStderr bounds the stderr kept from a tar helper.
const maxHelperStderr = 4096

// UploadTar unpacks the stream into dir inside the sandbox.
func (h *sandboxHandle) UploadTar(ctx context.Context, dir string, tarStream io.Reader) error {
	var stderr capped
	proc, err := h.Exec(ctx, types.Command{
		Args:   h.helper("tar-x", dir),
		Stdin:  tarStream,
		Stderr: &stderr,
	})
	if err != nil {
		return err
	}
	code, err := proc.Wait(ctx)
	if err != nil {
		return err
	}
	return agentinit.ExitError("unpack tar in "+dir, code, stderr.String())
}

// DownloadTar streams the tree at path out of the sandbox. A missing path
// is NotFound before any byte; closing the stream early kills the helper.
func (h *sandboxHandle) DownloadTar(ctx context.Context, path string) (io.ReadCloser, error) {
	if _, err := h.Stat(ctx, path); err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	stderr := &capped{}
	proc, err := h.Exec(ctx, types.Command{
		Args:   h.helper("tar-c", path),
		Stdout: pw,
		Stderr: stderr,
	})
	if err != nil {
		pw.Close()
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		code, err := proc.Wait(ctx)
		if err == nil {
			err = agentinit.ExitError("tar "+path, code, stderr.String())
		}
		pw.CloseWithError(err) // nil: EOF
	}()
	return &treeReader{PipeReader: pr, stop: func() {
		select {
		case <-done:
			return
		default:
		}
		_ = proc.Signal(context.WithoutCancel(ctx), types.SIGKILL)
		<-done
	}}, nil
}

// treeReader stops the helper when closed before the end.
type treeReader struct {
	*io.PipeReader
	once sync.Once
	stop func()
}

func (r *treeReader) Close() error {
	r.once.Do(func() {
		r.PipeReader.CloseWithError(errTreeClosed)
		r.stop()
	})
	return nil
}

var errTreeClosed = errors.New("tree download closed")

// capped keeps the first maxHelperStderr bytes written to it.
type capped struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := maxHelperStderr - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}
