package local

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/agent/pid1"
	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

var (
	_ driver.Sandbox        = (*sandboxHandle)(nil)
	_ driver.EnvdServer     = (*sandboxHandle)(nil)
	_ driver.TreeUploader   = (*sandboxHandle)(nil)
	_ driver.TreeDownloader = (*sandboxHandle)(nil)
)

// sandboxHandle is one sandbox: envd calls on its agent's socket.
type sandboxHandle struct {
	p       *Provider
	id      string
	socket  string
	token   string
	workDir string
	http    *http.Client
	env     *envd.Client
	once    sync.Once
	ports   ports
}

func (h *sandboxHandle) ID() string { return h.id }

// Exec runs the argv as given as cmd.User, else the Spec's (or image's)
// user, in cmd.Dir, else the Spec's (or image's) working directory.
func (h *sandboxHandle) Exec(ctx context.Context, cmd driver.Command) (driver.Process, error) {
	if cmd.Dir == "" {
		cmd.Dir = h.workDir
	}
	p, err := h.env.Exec(ctx, cmd)
	if err != nil {
		return nil, h.gone(err)
	}
	return p, nil
}

func (h *sandboxHandle) WriteFile(ctx context.Context, path string, r io.Reader, mode uint32) error {
	return h.gone(h.env.WriteFile(ctx, path, r, mode))
}

func (h *sandboxHandle) ReadFile(ctx context.Context, path string) (io.ReadCloser, error) {
	rc, err := h.env.ReadFile(ctx, path)
	return rc, h.gone(err)
}

func (h *sandboxHandle) Stat(ctx context.Context, path string) (driver.FileInfo, error) {
	fi, err := h.env.Stat(ctx, path)
	return fi, h.gone(err)
}

func (h *sandboxHandle) ListDir(ctx context.Context, path string) ([]driver.FileInfo, error) {
	fis, err := h.env.ListDir(ctx, path)
	return fis, h.gone(err)
}

func (h *sandboxHandle) MakeDir(ctx context.Context, path string) error {
	return h.gone(h.env.MakeDir(ctx, path))
}

func (h *sandboxHandle) Remove(ctx context.Context, path string) error {
	return h.gone(h.env.Remove(ctx, path))
}

// gone turns a refused connection into NotFound: the agent's socket refuses
// only when the agent has ended, and with it the sandbox.
func (h *sandboxHandle) gone(err error) error {
	if err == nil || errors.Is(err, errdefs.ErrNotFound) {
		return err
	}
	if errors.Is(err, unix.ECONNREFUSED) || errors.Is(err, unix.ENOENT) {
		// %v: the transport's class (Unavailable) must not ride along.
		return errdefs.Errorf(errdefs.NotFound, "sandbox %s has ended (%v)", h.id, err)
	}
	return err
}

// SetTimeout moves the agent's deadline, then the record that List and
// Connect read. The agent is the authority: it ends the sandbox.
func (h *sandboxHandle) SetTimeout(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return errdefs.Errorf(errdefs.InvalidArgument, "timeout %v is not positive", d)
	}
	t := time.Now().Add(d)
	if err := pid1.SetDeadline(ctx, h.socket, h.token, t); err != nil {
		return h.gone(err)
	}
	m, err := h.p.readMeta(h.id)
	if err != nil {
		return err
	}
	m.Expires = t.UTC()
	return h.p.writeMeta(m)
}

// Delete destroys the sandbox.
func (h *sandboxHandle) Delete(ctx context.Context) error {
	return h.p.Delete(ctx, h.id)
}

// Close ends this handle's streams and idle connections; the sandbox lives.
func (h *sandboxHandle) Close() error {
	var err error
	h.once.Do(func() {
		h.closePorts()
		err = h.env.Close()
		h.http.CloseIdleConnections()
	})
	return err
}

// EnvdEndpoint is the agent itself: `berth serve` forwards envd calls to it
// over the socket with the sandbox's token.
func (h *sandboxHandle) EnvdEndpoint(context.Context) (driver.EnvdEndpoint, error) {
	return driver.EnvdEndpoint{
		BaseURL:     envd.UnixBaseURL,
		Transport:   h.http.Transport, // this handle's connections, closed by Close
		AccessToken: h.token,
	}, nil
}
