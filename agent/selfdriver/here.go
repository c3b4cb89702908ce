package selfdriver

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/internal/httpserve"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Name is the provider's name in errors and logs.
const Name = "here"

var (
	_ driver.Provider = (*provider)(nil)
	_ driver.Sandbox  = (*handle)(nil)
)

// New serves envd for this machine on a private socket and returns the
// provider over it. Close stops the server.
func New() (*sandbox.Provider, error) {
	dir, err := os.MkdirTemp("", "berth-here-")
	if err != nil {
		return nil, err
	}
	token := rand.Text()
	srv, err := envd.NewServer(envd.ServerOptions{AccessToken: token})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	sock := filepath.Join(dir, "envd.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	hs := httpserve.Start(ln, srv, 0)
	hc := envd.UnixHTTPClient(sock)
	cl, err := envd.NewClient(envd.UnixBaseURL, hc, envd.WithAccessToken(token))
	if err != nil {
		_ = hs.Close()
		_ = os.RemoveAll(dir)
		return nil, err
	}
	p := &provider{dir: dir, hs: hs, srv: srv, hc: hc, env: cl, live: map[string]*handle{}}
	return sandbox.NewProvider(Name, p), nil
}

type provider struct {
	dir string
	hs  *http.Server
	srv *envd.Server
	hc  *http.Client
	env *envd.Client

	mu   sync.Mutex
	live map[string]*handle
	once sync.Once
}

func (p *provider) Create(_ context.Context, spec driver.Spec) (driver.Sandbox, error) {
	h := &handle{p: p, id: Name + "-" + rand.Text()[:12], spec: spec, pids: map[int]bool{}, created: time.Now()}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.live[h.id] = h
	return h, nil
}

func (p *provider) Connect(_ context.Context, id string) (driver.Sandbox, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if h, ok := p.live[id]; ok {
		return h, nil
	}
	return nil, errdefs.Errorf(errdefs.NotFound, "no sandbox %q here", id)
}

func (p *provider) List(_ context.Context, labels map[string]string) ([]driver.Info, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []driver.Info
outer:
	for _, h := range p.live {
		for k, v := range labels {
			if h.spec.Labels[k] != v {
				continue outer
			}
		}
		out = append(out, driver.Info{ID: h.id, Provider: Name, Labels: maps.Clone(h.spec.Labels), State: "running", CreatedAt: h.created})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (p *provider) Delete(ctx context.Context, id string) error {
	p.mu.Lock()
	h, ok := p.live[id]
	delete(p.live, id)
	p.mu.Unlock()
	if !ok {
		return errdefs.Errorf(errdefs.NotFound, "no sandbox %q here", id)
	}
	return h.kill(ctx)
}

// Capabilities accepts every network mode, GPUs and builds: the enclosing
// sandbox was made from the Spec and enforces it; nothing here could.
func (p *provider) Capabilities() driver.Capabilities {
	return driver.Derive[*provider, *handle, *envd.Process](driver.Capabilities{
		ResourceMode: driver.ResourcesLimits,
		Networks:     []driver.NetworkMode{driver.NetworkNone, driver.NetworkPublic, driver.NetworkAllowlist},
		BuildImage:   true, GPUs: true,
	})
}

// Close ends every handle's processes and stops the server.
func (p *provider) Close() error {
	p.once.Do(func() {
		p.mu.Lock()
		hs := make([]*handle, 0, len(p.live))
		for _, h := range p.live {
			hs = append(hs, h)
		}
		p.live = map[string]*handle{}
		p.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, h := range hs {
			_ = h.kill(ctx)
		}
		_ = p.env.Close()
		_ = p.hs.Close()
		_ = p.srv.Close()
		p.hc.CloseIdleConnections()
		_ = os.RemoveAll(p.dir)
	})
	return nil
}

// handle is one Create's view of this machine.
type handle struct {
	p       *provider
	id      string
	spec    driver.Spec
	created time.Time

	mu   sync.Mutex
	pids map[int]bool
	gone bool
}

func (h *handle) ID() string { return h.id }

func (h *handle) Exec(ctx context.Context, cmd driver.Command) (driver.Process, error) {
	if cmd.Dir == "" {
		cmd.Dir = h.spec.WorkDir
	}
	if cmd.User == "" {
		cmd.User = h.spec.User
	}
	if len(h.spec.Env) > 0 {
		env := maps.Clone(h.spec.Env)
		maps.Copy(env, cmd.Env)
		cmd.Env = env
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gone {
		return nil, errdefs.Errorf(errdefs.NotFound, "sandbox %s was deleted", h.id)
	}
	p, err := h.p.env.Exec(ctx, cmd)
	if err != nil {
		return nil, err
	}
	h.pids[p.PID()] = true
	go func() {
		<-p.Done()
		h.mu.Lock()
		delete(h.pids, p.PID())
		h.mu.Unlock()
	}()
	return p, nil
}

// kill ends the processes this handle started, with their process
// groups' members where envd put them in one.
func (h *handle) kill(ctx context.Context) error {
	h.mu.Lock()
	h.gone = true
	pids := make([]int, 0, len(h.pids))
	for pid := range h.pids {
		pids = append(pids, pid)
	}
	h.mu.Unlock()
	var errs []error
	for _, pid := range pids {
		if err := h.p.env.Signal(ctx, pid, driver.SIGKILL); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			errs = append(errs, fmt.Errorf("kill %d: %w", pid, err))
		}
	}
	return errors.Join(errs...)
}

func (h *handle) WriteFile(ctx context.Context, path string, r io.Reader, mode uint32) error {
	return h.p.env.WriteFile(ctx, path, r, mode)
}

func (h *handle) ReadFile(ctx context.Context, path string) (io.ReadCloser, error) {
	return h.p.env.ReadFile(ctx, path)
}

func (h *handle) Stat(ctx context.Context, path string) (driver.FileInfo, error) {
	return h.p.env.Stat(ctx, path)
}

func (h *handle) ListDir(ctx context.Context, path string) ([]driver.FileInfo, error) {
	return h.p.env.ListDir(ctx, path)
}

func (h *handle) MakeDir(ctx context.Context, path string) error {
	return h.p.env.MakeDir(ctx, path)
}

func (h *handle) Remove(ctx context.Context, path string) error {
	return h.p.env.Remove(ctx, path)
}

func (h *handle) Delete(ctx context.Context) error { return h.p.Delete(ctx, h.id) }

// Close keeps the processes: only Delete ends them.
func (h *handle) Close() error { return nil }
