package sandbox

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/berth-sh/berth/sandbox/driver"
)

// teardownTimeout bounds cleanup that runs after the caller's context ended.
const teardownTimeout = 2 * time.Minute

// Provider hands out sandboxes of one backend. It wraps a driver.Provider and
// does the work every backend shares. Its methods are safe for concurrent use.
//
// Its calls, and the calls of its sandboxes, hold a read lock while the
// driver works; Close takes the write lock, so it waits for them before it
// closes the driver (as go-cloud's blob.Bucket does), and every call after
// it fails with InvalidArgument.
type Provider struct {
	name   string
	d      driver.Provider
	log    *slog.Logger
	mu     sync.RWMutex // read-held by calls in flight; Close takes it
	closed bool
}

// ProviderOption configures NewProvider.
type ProviderOption func(*Provider)

// WithLogger sends the provider's debug events (create, delete, timings) to l.
func WithLogger(l *slog.Logger) ProviderOption {
	return func(p *Provider) { p.log = l }
}

// NewProvider wraps a driver under its registry name.
func NewProvider(name string, d driver.Provider, opts ...ProviderOption) *Provider {
	p := &Provider{name: name, d: d, log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Name is the registry name of the provider.
func (p *Provider) Name() string { return p.name }

// Capabilities reports what the provider supports.
func (p *Provider) Capabilities() Capabilities { return p.d.Capabilities() }

// begin starts a call: until end is called it holds the read lock that
// makes Close wait for it. After Close it fails with InvalidArgument.
func (p *Provider) begin(op, id string) (end func(), err error) {
	p.mu.RLock()
	if p.closed {
		p.mu.RUnlock()
		return nil, wrap(Errorf(InvalidArgument, "provider is closed"), op, p.name, id)
	}
	return p.mu.RUnlock, nil
}

// Create makes a sandbox. The Spec is validated, defaults are filled in, and
// features the provider lacks are refused as NotSupported before anything is
// created. If ctx ends while the driver is creating, a sandbox that appears
// anyway is deleted, so an abandoned Create leaks nothing.
func (p *Provider) Create(ctx context.Context, spec Spec) (*Sandbox, error) {
	const op = "create"
	end, err := p.begin(op, "")
	if err != nil {
		return nil, err
	}
	defer end()
	if err := spec.Validate(); err != nil {
		return nil, wrap(err, op, p.name, "")
	}
	spec = spec.WithDefaults()
	if err := p.checkSupported(spec); err != nil {
		return nil, wrap(err, op, p.name, "")
	}
	start := time.Now()
	d, err := p.d.Create(ctx, spec)
	if err != nil {
		return nil, wrap(err, op, p.name, "")
	}
	if ctx.Err() != nil {
		// The caller gave up while the provider was still working: the
		// sandbox exists but nobody will ever delete it unless we do.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
		defer cancel()
		derr := d.Delete(dctx)
		_ = d.Close()
		p.log.Warn("deleted sandbox created after cancellation", "provider", p.name, "id", d.ID(), "error", derr)
		return nil, wrap(ctx.Err(), op, p.name, d.ID())
	}
	p.log.Debug("created sandbox", "provider", p.name, "id", d.ID(), "duration", time.Since(start))
	return newSandbox(p, d), nil
}

func (p *Provider) checkSupported(spec Spec) error {
	caps := p.d.Capabilities()
	if !caps.Supports(spec.Network.Mode) {
		return Errorf(NotSupported, "network mode %q is not supported (supported: %v)", spec.Network.Mode, caps.Networks)
	}
	if spec.Resources.GPUs > 0 && !caps.GPUs {
		return Errorf(NotSupported, "GPUs are not supported")
	}
	if spec.Build != nil && !caps.BuildImage {
		return Errorf(NotSupported, "building images is not supported; give an image reference")
	}
	if err := checkPorts(spec, caps); err != nil {
		return err
	}
	if caps.MaxTTL > 0 && spec.TTL > caps.MaxTTL {
		return Errorf(InvalidArgument, "ttl %v is longer than the provider's maximum %v", spec.TTL, caps.MaxTTL)
	}
	return nil
}

// Connect attaches to an existing sandbox by ID, from any process.
func (p *Provider) Connect(ctx context.Context, id string) (*Sandbox, error) {
	const op = "connect"
	end, err := p.begin(op, id)
	if err != nil {
		return nil, err
	}
	defer end()
	if id == "" {
		return nil, wrap(Errorf(InvalidArgument, "empty sandbox id"), op, p.name, id)
	}
	d, err := p.d.Connect(ctx, id)
	if err != nil {
		return nil, wrap(err, op, p.name, id)
	}
	return newSandbox(p, d), nil
}

// List returns live sandboxes that carry every given label.
func (p *Provider) List(ctx context.Context, labels map[string]string) ([]Info, error) {
	const op = "list"
	end, err := p.begin(op, "")
	if err != nil {
		return nil, err
	}
	defer end()
	if err := ValidateLabels(labels); err != nil {
		return nil, wrap(err, op, p.name, "")
	}
	infos, err := p.d.List(ctx, labels)
	if err != nil {
		return nil, wrap(err, op, p.name, "")
	}
	for i := range infos {
		infos[i].Provider = p.name
	}
	return infos, nil
}

// Delete destroys a sandbox by ID (for reapers and the CLI). An unknown ID is
// NotFound.
func (p *Provider) Delete(ctx context.Context, id string) error {
	const op = "delete"
	end, err := p.begin(op, id)
	if err != nil {
		return err
	}
	defer end()
	if id == "" {
		return wrap(Errorf(InvalidArgument, "empty sandbox id"), op, p.name, id)
	}
	return wrap(p.d.Delete(ctx, id), op, p.name, id)
}

// Close releases the provider once the calls in flight on it and on its
// sandboxes have returned. It is idempotent and does not delete sandboxes.
func (p *Provider) Close() error {
	p.mu.Lock() // waits for the read locks of calls in flight
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	return wrap(p.d.Close(), "close", p.name, "")
}
