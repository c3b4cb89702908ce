package e2b

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/providers/internal/rest"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

var (
	_ driver.Sandbox       = (*sandboxHandle)(nil)
	_ driver.TimeoutSetter = (*sandboxHandle)(nil)
	_ driver.Signaler      = (*envd.Process)(nil)
)

// Bounds of the keep-alive loop.
const (
	minKeepEvery = 50 * time.Millisecond // no spinning on a tiny TTL
	rearmTimeout = 30 * time.Second      // one re-arm call
)

// sandboxHandle is one sandbox: the control plane for its life, envd for
// the rest.
type sandboxHandle struct {
	p       *Provider
	id      string
	token   string
	env     *envd.Client
	workDir string
	domain  string // E2B's domain of the sandbox's hosts
	// traffic is the sandbox's traffic access token (a secret), known
	// from create or connect, or learnt on the first Endpoint (under mu).
	traffic struct {
		token string
		known bool
		endAt time.Time
	}
	trafficSecret atomic.Value // traffic.token, for scrub without mu
	// modesKept: the server kept a ?mode= other than the default.
	modesKept atomic.Bool

	mu       sync.Mutex
	stopKeep context.CancelFunc // nil when no keep-alive runs
	keepDone chan struct{}
	once     sync.Once
}

func (h *sandboxHandle) ID() string { return h.id }

// scrub keeps the API key and the access token out of err's text.
func (h *sandboxHandle) scrub(err error) error {
	secrets := []string{h.p.opts.APIKey.Reveal(), h.token}
	if t, _ := h.trafficSecret.Load().(string); t != "" {
		secrets = append(secrets, t)
	}
	return rest.Scrub(err, secrets...)
}

// Exec runs the argv as given (no shell is added) as cmd.User, else the
// Spec's user, in cmd.Dir, else the Spec's working directory.
func (h *sandboxHandle) Exec(ctx context.Context, cmd driver.Command) (driver.Process, error) {
	if cmd.Dir == "" {
		cmd.Dir = h.workDir
	}
	p, err := h.env.Exec(ctx, cmd)
	if err != nil {
		return nil, h.scrub(err)
	}
	return p, nil
}

// WriteFile uploads through /files with berth's ?mode= extension. Upstream
// envd ignores it and creates 0644 files, so another mode is checked with
// Stat and, where the server did not keep it, set with chmod; once a
// server is seen to keep modes the check is skipped.
func (h *sandboxHandle) WriteFile(ctx context.Context, path string, r io.Reader, mode uint32) error {
	if err := h.env.WriteFile(ctx, path, r, mode); err != nil {
		return h.scrub(err)
	}
	mode &= 0o7777
	if mode == defaultFileMode || h.modesKept.Load() {
		return nil
	}
	fi, err := h.env.Stat(ctx, path)
	if err != nil {
		return h.scrub(err)
	}
	if fi.Mode&0o7777 == mode {
		h.modesKept.Store(true)
		return nil
	}
	return h.chmod(ctx, path, mode)
}

// defaultFileMode is the mode envd gives an uploaded file.
const defaultFileMode = 0o644

// chmod sets a file's mode with the sandbox's chmod (argv, no shell).
func (h *sandboxHandle) chmod(ctx context.Context, path string, mode uint32) error {
	var stderr bytes.Buffer
	p, err := h.env.Exec(ctx, driver.Command{
		Args:   []string{"chmod", strconv.FormatUint(uint64(mode), 8), "--", path},
		Stderr: &limitedWriter{w: &stderr, n: 1024},
	})
	if err != nil {
		return h.scrub(err)
	}
	code, err := p.Wait(ctx)
	if err != nil {
		return h.scrub(err)
	}
	if code != 0 {
		return errdefs.Errorf(errdefs.Unknown, "e2b write file: setting mode %o: chmod exited %d: %s", mode, code, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}

// limitedWriter keeps the first n bytes and drops the rest.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		l.n -= k
		_, _ = l.w.Write(p[:k])
	}
	return len(p), nil
}

func (h *sandboxHandle) ReadFile(ctx context.Context, path string) (io.ReadCloser, error) {
	rc, err := h.env.ReadFile(ctx, path)
	return rc, h.scrub(err)
}

func (h *sandboxHandle) Stat(ctx context.Context, path string) (driver.FileInfo, error) {
	fi, err := h.env.Stat(ctx, path)
	return fi, h.scrub(err)
}

func (h *sandboxHandle) ListDir(ctx context.Context, path string) ([]driver.FileInfo, error) {
	fis, err := h.env.ListDir(ctx, path)
	return fis, h.scrub(err)
}

func (h *sandboxHandle) MakeDir(ctx context.Context, path string) error {
	return h.scrub(h.env.MakeDir(ctx, path))
}

func (h *sandboxHandle) Remove(ctx context.Context, path string) error {
	return h.scrub(h.env.Remove(ctx, path))
}

// SetTimeout moves the deadline to now + d. The caller owns the deadline
// from then on: the keep-alive stops first, so no re-arm lands after it.
func (h *sandboxHandle) SetTimeout(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return errdefs.Errorf(errdefs.InvalidArgument, "e2b set timeout: %v is not positive", d)
	}
	h.stopKeepalive()
	return h.scrub(h.p.api.setTimeout(ctx, h.id, seconds(d)))
}

// Delete kills the sandbox.
func (h *sandboxHandle) Delete(ctx context.Context) error {
	h.stopKeepalive()
	return h.scrub(h.p.api.kill(ctx, h.id))
}

// Close stops the keep-alive and the envd streams of this handle; the
// sandbox lives on until its TTL.
func (h *sandboxHandle) Close() error {
	var err error
	h.once.Do(func() {
		h.stopKeepalive()
		err = h.env.Close()
	})
	return err
}

func (h *sandboxHandle) stopKeepalive() {
	h.mu.Lock()
	stop, done := h.stopKeep, h.keepDone
	h.stopKeep, h.keepDone = nil, nil
	h.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// keepAlive re-arms the TTL every ttl/6 until ctx ends or the sandbox is
// gone. A failed re-arm is logged and tried again at the next tick: five
// more remain before the deadline.
func (h *sandboxHandle) keepAlive(ctx context.Context, ttl time.Duration) {
	t := time.NewTicker(max(ttl/6, minKeepEvery))
	defer t.Stop()
	secs := seconds(ttl)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, rearmTimeout)
		err := h.p.api.setTimeout(cctx, h.id, secs)
		cancel()
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return
		case errors.Is(err, errdefs.ErrNotFound):
			h.p.opts.Logger.Debug("e2b: sandbox gone; keep-alive stops", "id", h.id)
			return
		default:
			h.p.opts.Logger.Warn("e2b: re-arming the sandbox TTL failed", "id", h.id, "error", h.scrub(err).Error())
		}
	}
}
