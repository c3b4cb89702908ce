package k8s

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-sh/berth/agent/podagent"
	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/internal/portproxy"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

var (
	_ driver.Sandbox    = (*sandboxHandle)(nil)
	_ driver.EnvdServer = (*sandboxHandle)(nil)
	_ driver.Provider   = (*Provider)(nil)
	_ http.RoundTripper = (*http.Transport)(nil)
)

// baseURL is the agent's URL; its host is never dialled (the transport
// goes to the pod).
const baseURL = "http://agent"

// sandboxHandle is one sandbox: its pod (or claim) for its life, its agent
// (envd) for the rest.
type sandboxHandle struct {
	p     *Provider
	id    string
	token string
	env   *envd.Client
	tr    *http.Transport
	fwd   podDialer // the pod's ports, the agent's among them
	ports portproxy.Endpoints

	gone     atomic.Pointer[string] // why the pod went, once it has
	stopWait context.CancelFunc
	waitDone chan struct{}
	once     sync.Once
}

func tokenHash(key []byte, name string) string { return podagent.TokenHash(token(key, name)) }

// handle builds the handle of a running sandbox and starts following it
// in the cache, so that calls fail at once with the reason when it goes.
func (p *Provider) handle(t target, key []byte) (*sandboxHandle, error) {
	tok := token(key, t.id)
	tr, fwd := p.agentTransport(t.pod, t.podIP, t.fwd)
	opts := []envd.ClientOption{envd.WithAccessToken(tok)}
	if t.user != "" {
		opts = append(opts, envd.WithUser(t.user))
	}
	c, err := envd.NewClient(baseURL, &http.Client{Transport: tr}, opts...)
	if err != nil {
		fwd.Close()
		return nil, err
	}
	h := &sandboxHandle{p: p, id: t.id, token: tok, env: c, tr: tr, fwd: fwd, waitDone: make(chan struct{})}
	var ctx context.Context
	ctx, h.stopWait = context.WithCancel(context.Background())
	go h.follow(ctx)
	return h, nil
}

// follow waits for the sandbox to leave the cache or end, then cuts the
// data plane so that no call waits on a dead pod.
func (h *sandboxHandle) follow(ctx context.Context) {
	defer close(h.waitDone)
	why := h.p.m.gone(ctx, h.id)
	if why == "" {
		return
	}
	h.gone.Store(&why)
	h.fwd.Close()
	h.tr.CloseIdleConnections()
	_ = h.env.Close()
}

// wrap turns a data-plane failure after the pod went into NotFound with the
// reason (a namespace deleted mid-job reads "its pod was deleted").
func (h *sandboxHandle) wrap(err error) error {
	if err == nil {
		return nil
	}
	if why := h.gone.Load(); why != nil {
		return errdefs.Errorf(errdefs.NotFound, "k8s: sandbox %s is gone: %s: %w", h.id, *why, err)
	}
	return err
}

func (h *sandboxHandle) ID() string { return h.id }

// waitAgent waits for the agent to answer /health: the pod runs before the
// agent listens.
func (h *sandboxHandle) waitAgent(ctx context.Context) error {
	delay := 20 * time.Millisecond
	for {
		err := h.env.Health(ctx)
		if err == nil {
			return nil
		}
		if why := h.gone.Load(); why != nil {
			return h.wrap(err)
		}
		if errdefs.ClassOf(err) == errdefs.Unauthenticated {
			return err // RBAC refused the port-forward
		}
		select {
		case <-ctx.Done():
			return errdefs.Errorf(errdefs.DeadlineExceeded, "k8s: the agent of pod %s did not answer: %w", h.id, err)
		case <-time.After(delay):
		}
		delay = min(delay*2, time.Second)
	}
}

func (h *sandboxHandle) Exec(ctx context.Context, cmd driver.Command) (driver.Process, error) {
	pr, err := h.env.Exec(ctx, cmd)
	if err != nil {
		return nil, h.wrap(err)
	}
	return &process{Process: pr, h: h}, nil
}

// process wraps Wait's errors with the pod's fate.
type process struct {
	*envd.Process
	h *sandboxHandle
}

func (p *process) Wait(ctx context.Context) (int, error) {
	code, err := p.Process.Wait(ctx)
	return code, p.h.wrap(err)
}

func (h *sandboxHandle) WriteFile(ctx context.Context, path string, r io.Reader, mode uint32) error {
	return h.wrap(h.env.WriteFile(ctx, path, r, mode))
}

func (h *sandboxHandle) ReadFile(ctx context.Context, path string) (io.ReadCloser, error) {
	rc, err := h.env.ReadFile(ctx, path)
	return rc, h.wrap(err)
}

func (h *sandboxHandle) Stat(ctx context.Context, path string) (driver.FileInfo, error) {
	fi, err := h.env.Stat(ctx, path)
	return fi, h.wrap(err)
}

func (h *sandboxHandle) ListDir(ctx context.Context, path string) ([]driver.FileInfo, error) {
	fis, err := h.env.ListDir(ctx, path)
	return fis, h.wrap(err)
}

func (h *sandboxHandle) MakeDir(ctx context.Context, path string) error {
	return h.wrap(h.env.MakeDir(ctx, path))
}

func (h *sandboxHandle) Remove(ctx context.Context, path string) error {
	return h.wrap(h.env.Remove(ctx, path))
}

// SetTimeout moves the sandbox's TTL (one PATCH): the pod's annotation,
// or the SandboxClaim's shutdownTime.
func (h *sandboxHandle) SetTimeout(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return errdefs.Errorf(errdefs.InvalidArgument, "k8s set timeout: %v is not positive", d)
	}
	return h.p.m.setExpiry(ctx, h.id, time.Now().Add(d))
}

// Delete deletes the sandbox.
func (h *sandboxHandle) Delete(ctx context.Context) error {
	return h.p.Delete(ctx, h.id)
}

// EnvdEndpoint hands berth serve the agent itself, so that it forwards envd
// calls as they are.
func (h *sandboxHandle) EnvdEndpoint(context.Context) (driver.EnvdEndpoint, error) {
	if why := h.gone.Load(); why != nil {
		return driver.EnvdEndpoint{}, errdefs.Errorf(errdefs.NotFound, "k8s: sandbox %s is gone: %s", h.id, *why)
	}
	return driver.EnvdEndpoint{BaseURL: baseURL, Transport: h.tr, AccessToken: h.token}, nil
}

// Close ends this handle's streams and its port-forward session; the pod
// lives on.
func (h *sandboxHandle) Close() error {
	h.once.Do(func() {
		h.stopWait()
		<-h.waitDone
		_ = h.env.Close()
		h.closePorts()
		h.fwd.Close()
		h.tr.CloseIdleConnections()
	})
	return nil
}
