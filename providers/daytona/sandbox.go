package daytona

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/berth-sh/berth/providers/internal/rest"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

var (
	_ driver.Sandbox       = (*Sandbox)(nil)
	_ driver.TimeoutSetter = (*Sandbox)(nil)
	_ driver.Signaler      = (*process)(nil)
)

// Sandbox is a handle to one Daytona sandbox.
type Sandbox struct {
	p    *Provider
	id   string
	user string

	// life bounds the goroutines that follow commands and the activity
	// refresh; Close ends it.
	life       context.Context
	cancel     context.CancelFunc
	procs      sync.WaitGroup
	activeOnce sync.Once

	mu      sync.Mutex
	toolbox string // <toolbox proxy URL>/<id>, found on first use
}

func (p *Provider) newHandle(sb *sandboxDTO) *Sandbox {
	life, cancel := context.WithCancel(context.Background())
	return &Sandbox{p: p, id: sb.ID, user: sb.User, life: life, cancel: cancel}
}

// ID is the Daytona sandbox ID.
func (s *Sandbox) ID() string { return s.id }

// toolboxURL returns the base of the sandbox's toolbox API, asking the
// control plane for the proxy's address once.
func (s *Sandbox) toolboxURL(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.toolbox != "" {
		return s.toolbox, nil
	}
	var out struct {
		URL string `json:"url"`
	}
	if err := s.p.c.do(ctx, rest.Call{Method: http.MethodGet, URL: s.p.sandboxURL(s.id, "toolbox-proxy-url")}, &out); err != nil {
		return "", err
	}
	u, err := url.Parse(out.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", errdefs.Errorf(errdefs.Unavailable, "daytona: the toolbox proxy URL %q is not an http(s) URL", out.URL)
	}
	// The API named the proxy: the key may go there too, and nowhere else.
	if err := s.p.c.rc.AllowOrigin(out.URL); err != nil {
		return "", err
	}
	s.toolbox = strings.TrimRight(out.URL, "/") + "/" + url.PathEscape(s.id)
	return s.toolbox, nil
}

// tb is the toolbox URL of path (which starts with "/").
func (s *Sandbox) tb(ctx context.Context, path string) (string, error) {
	base, err := s.toolboxURL(ctx)
	if err != nil {
		return "", err
	}
	return base + path, nil
}

// SetTimeout moves the sandbox's TTL to now + d, rounded up to whole
// minutes: Daytona destroys the sandbox then, whatever its state or
// activity.
func (s *Sandbox) SetTimeout(ctx context.Context, d time.Duration) error {
	return s.p.c.do(ctx, rest.Call{Method: http.MethodPost, URL: s.p.sandboxURL(s.id, "ttl", itoa(ceilMinutes(d)))}, nil)
}

// Delete destroys the sandbox.
func (s *Sandbox) Delete(ctx context.Context) error { return s.p.Delete(ctx, s.id) }

// Close stops following this handle's commands (they keep running in the
// sandbox) and waits for those goroutines to end.
func (s *Sandbox) Close() error {
	s.cancel()
	s.procs.Wait()
	return nil
}
