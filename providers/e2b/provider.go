package e2b

import (
	"context"
	"errors"
	"math"
	"net/http"
	"regexp"
	"sync"
	"time"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/providers/internal/rest"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

var _ driver.Provider = (*Provider)(nil)

// Capabilities are what the driver supports: the interfaces its handles
// implement (driver.Derive) and the facts they cannot show. Resources are
// the template's (E2B's create call has no knob for them); pause exists on
// E2B but the driver has no call for it, so it is not claimed.
func Capabilities() driver.Capabilities {
	return driver.Derive[*Provider, *sandboxHandle, *envd.Process](driver.Capabilities{
		ResourceMode: driver.ResourcesLimits,
		Networks:     []driver.NetworkMode{driver.NetworkNone, driver.NetworkPublic},
		Ports:        []driver.PortProtocol{driver.PortHTTP},
	})
}

// Metadata keys the driver keeps a Spec's defaults under, so that Connect
// from another process runs commands where and as the creator asked. They
// are not labels: List leaves them out and Create refuses them as labels.
// (berth serve keeps "berth." keys for itself.)
const (
	metaWorkDir = "berth-workdir"
	metaUser    = "berth-user"
)

// resumeTTL is the life given to a sandbox that Connect resumes, or whose
// deadline the server did not report, when its original TTL is unknown.
const resumeTTL = 5 * time.Minute

// cleanupTimeout bounds the delete of a sandbox whose create half failed.
const cleanupTimeout = 30 * time.Second

// idRE is what a sandbox id may look like: it becomes a path segment and,
// without E2B_SANDBOX_URL, a DNS label.
var idRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`) })

// Provider is the E2B driver.
type Provider struct {
	opts Options
	api  *api
	// hc carries the data plane: no key, no redirect to another origin.
	hc *http.Client

	// ctx bounds the keep-alive loops; Close cancels it and waits.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	closed bool
}

// New opens the driver. It does not contact the server.
func New(opts Options) (*Provider, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	base := opts.HTTPClient
	if base == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// One data-plane host serves every exec stream of a sandbox (all of
		// them, behind E2B_SANDBOX_URL).
		t.MaxIdleConnsPerHost = 64
		base = &http.Client{Transport: t}
	}
	key := opts.APIKey
	c, err := rest.New(rest.Options{
		Name:         "e2b",
		HTTPClient:   base,
		Auth:         func(h http.Header) { h.Set("X-API-KEY", key.Reveal()) },
		Secrets:      func() []string { return []string{key.Reveal()} },
		Origins:      []string{opts.APIURL},
		Retries:      opts.MaxRetries,
		MaxRetryWait: opts.MaxRetryWait,
		BackoffBase:  500 * time.Millisecond,
		MaxBody:      maxBody,
		ErrorBody:    errorBody,
		Logger:       opts.Logger,
	})
	if err != nil {
		return nil, err
	}
	p := &Provider{opts: opts, api: &api{base: opts.APIURL, c: c}, hc: c.PlainClient()}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	return p, nil
}

// Capabilities reports what the driver supports.
func (p *Provider) Capabilities() driver.Capabilities { return Capabilities() }

// scrub keeps the API key out of err's text.
func (p *Provider) scrub(err error) error { return rest.Scrub(err, p.opts.APIKey.Reveal()) }

// Create asks for a sandbox of the template named by spec.Image.
func (p *Provider) Create(ctx context.Context, spec driver.Spec) (driver.Sandbox, error) {
	if spec.Image == "" {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "e2b create: a template (Spec.Image) is required")
	}
	for _, k := range []string{metaWorkDir, metaUser} {
		if _, ok := spec.Labels[k]; ok {
			return nil, errdefs.Errorf(errdefs.InvalidArgument, "e2b create: label %q is reserved for the driver", k)
		}
	}
	md := make(map[string]string, len(spec.Labels)+2)
	for k, v := range spec.Labels {
		md[k] = v
	}
	if spec.WorkDir != "" {
		md[metaWorkDir] = spec.WorkDir
	}
	if spec.User != "" {
		md[metaUser] = spec.User
	}
	sb, err := p.api.create(ctx, e2bapi.NewSandbox{
		TemplateID:          spec.Image,
		Timeout:             e2bapi.Int64(seconds(spec.TTL)),
		AllowInternetAccess: e2bapi.Bool(spec.Network.Mode == driver.NetworkPublic),
		Metadata:            md,
		EnvVars:             spec.Env,
		// The sandbox's ports answer only holders of its traffic token,
		// which Endpoint hands out; E2B's default is anyone with the URL.
		Network: &e2bapi.SandboxNetworkConfig{AllowPublicTraffic: e2bapi.Bool(false)},
	})
	if err != nil {
		return nil, p.scrub(err)
	}
	h, err := p.open(sb.SandboxID, sb.EnvdAccessToken, sb.Domain, spec.WorkDir, spec.User)
	if err == nil {
		// A server that ignored the network options has no token: its
		// ports are public, and none is needed.
		h.setTraffic(deref(sb.TrafficAccessToken))
	}
	if err != nil {
		// Nothing may be left running: the sandbox exists but is unusable.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		return nil, p.scrub(errors.Join(err, errdefs.IgnoreNotFound(p.api.kill(dctx, sb.SandboxID))))
	}
	p.startKeepalive(h, spec.TTL)
	return h, nil
}

// Connect finds a sandbox by id. A paused one is resumed; a running one
// whose details lack the envd token is connected to for it (a life
// extension to its own deadline, no more). Connected handles do not
// re-arm the TTL: the creator's handle owns it.
func (p *Provider) Connect(ctx context.Context, id string) (driver.Sandbox, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	d, err := p.api.get(ctx, id)
	if err != nil {
		return nil, p.scrub(err)
	}
	traffic, known := "", false
	if d.State == e2bapi.StatePaused || d.EnvdAccessToken == "" {
		ttl := time.Until(d.EndAt)
		if d.State == e2bapi.StatePaused {
			ttl = d.EndAt.Sub(d.StartedAt)
		}
		if d.EndAt.IsZero() || ttl <= 0 {
			ttl = resumeTTL
		}
		c, err := p.api.connect(ctx, id, seconds(ttl))
		if err != nil {
			return nil, p.scrub(err)
		}
		if c.EnvdAccessToken != "" {
			d.EnvdAccessToken = c.EnvdAccessToken
		}
		traffic, known = deref(c.TrafficAccessToken), true
		if c.Domain != nil {
			d.Domain = c.Domain
		}
	}
	if d.SandboxID == "" {
		d.SandboxID = id
	}
	h, err := p.open(d.SandboxID, d.EnvdAccessToken, d.Domain, d.Metadata[metaWorkDir], d.Metadata[metaUser])
	if err != nil {
		return nil, p.scrub(err)
	}
	h.traffic.endAt = d.EndAt
	if known {
		h.setTraffic(traffic)
	}
	return h, nil
}

// List returns the running and paused sandboxes carrying every label.
func (p *Provider) List(ctx context.Context, labels map[string]string) ([]driver.Info, error) {
	sbs, err := p.api.list(ctx, labels)
	if err != nil {
		return nil, p.scrub(err)
	}
	infos := make([]driver.Info, 0, len(sbs))
	for _, sb := range sbs {
		// The filter is the server's; a server that ignored it is caught here.
		if !driver.MatchLabels(sb.Metadata, labels) {
			continue
		}
		infos = append(infos, info(sb))
	}
	return infos, nil
}

func info(sb e2bapi.ListedSandbox) driver.Info {
	labels := make(map[string]string, len(sb.Metadata))
	for k, v := range sb.Metadata {
		if k != metaWorkDir && k != metaUser {
			labels[k] = v
		}
	}
	image := sb.TemplateID
	if sb.Alias != "" {
		image = sb.Alias
	}
	return driver.Info{
		ID:        sb.SandboxID,
		Image:     image,
		Labels:    labels,
		State:     sb.State,
		CreatedAt: sb.StartedAt,
		ExpiresAt: sb.EndAt,
	}
}

// Delete kills the sandbox with this id.
func (p *Provider) Delete(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	return p.scrub(p.api.kill(ctx, id))
}

// Close stops every keep-alive loop and releases the driver's idle
// connections. Sandboxes live on until their TTL.
func (p *Provider) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	p.api.c.CloseIdleConnections()
	return nil
}

// open builds the handle of a sandbox the control plane described: its
// id, envd access token and domain (nil or "": the configured one).
func (p *Provider) open(id, token string, sbDomain *string, workDir, user string) (*sandboxHandle, error) {
	if err := checkID(id); err != nil {
		return nil, errdefs.Errorf(errdefs.Unavailable, "e2b: the server answered a malformed sandbox id")
	}
	domain := p.opts.Domain
	if sbDomain != nil && *sbDomain != "" {
		domain = *sbDomain
	}
	base, hc := p.opts.SandboxURL, p.hc
	if base != "" {
		rt := p.hc.Transport
		if rt == nil {
			rt = http.DefaultTransport
		}
		hc = &http.Client{Transport: &routeTransport{base: rt, id: id}, CheckRedirect: rest.SameOrigin}
	} else {
		if !hostRE().MatchString(domain) {
			return nil, errdefs.Errorf(errdefs.Unavailable, "e2b: the server answered a domain that is not a host name")
		}
		base = "https://" + e2bapi.EnvdPort + "-" + id + "." + domain
	}
	c, err := envd.NewClient(base, hc, envd.WithAccessToken(token), envd.WithUser(user))
	if err != nil {
		return nil, err
	}
	return &sandboxHandle{p: p, id: id, token: token, env: c, workDir: workDir, domain: domain}, nil
}

// deref is a nullable string's value, "" for null.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// startKeepalive re-arms h's TTL every ttl/6 until h stops it or the
// provider closes.
func (p *Provider) startKeepalive(h *sandboxHandle, ttl time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	ctx, cancel := context.WithCancel(p.ctx)
	done := make(chan struct{})
	h.mu.Lock()
	h.stopKeep, h.keepDone = cancel, done
	h.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(done)
		h.keepAlive(ctx, ttl)
	}()
}

func checkID(id string) error {
	if !idRE().MatchString(id) {
		if len(id) > 130 {
			id = id[:130] + "..."
		}
		return errdefs.Errorf(errdefs.InvalidArgument, "e2b: %q is not a sandbox id", id)
	}
	return nil
}

// seconds is d in whole seconds for the wire (an int32), rounded up, at
// least 1.
func seconds(d time.Duration) int64 {
	s := math.Ceil(d.Seconds())
	return int64(min(max(s, 1), math.MaxInt32))
}
