package daytona

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/berth-sh/berth/providers/internal/rest"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

var _ driver.Provider = (*Provider)(nil)

// maxAdvisedWait is the longest throttle wait the driver sits out itself;
// a longer one goes back to the caller.
const maxAdvisedWait = 5 * time.Minute

// Capabilities are what the driver supports: the interfaces its handles
// implement (driver.Derive: pause, resume and fork, which Daytona does for
// VM-class sandboxes only) and the facts they cannot show. The TTL counts
// whole minutes, so that is the shortest timeout; disk is a limit.
func Capabilities() driver.Capabilities {
	return driver.Derive[*Provider, *Sandbox, *process](driver.Capabilities{
		ResourceMode: driver.ResourcesLimits,
		Networks:     []driver.NetworkMode{driver.NetworkNone, driver.NetworkPublic, driver.NetworkAllowlist},
		Storage:      true,
		MinTimeout:   time.Minute,
		Ports:        []driver.PortProtocol{driver.PortHTTP},
	})
}

// Provider is the Daytona driver. It is safe for concurrent use.
type Provider struct {
	opts   Options
	c      *client
	disk   *diskCap // nil without a disk quota
	closed atomic.Bool
}

// New returns a driver for the account whose key opts carry. It makes no
// request.
func New(opts Options) (*Provider, error) {
	opts, base, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	key := opts.APIKey
	if opts.RateLimitRetries == 0 {
		opts.RateLimitRetries = -1 // none: the REST client reads 0 as its default
	}
	rc, err := rest.New(rest.Options{
		Name:         "daytona",
		HTTPClient:   opts.HTTPClient,
		Auth:         func(h http.Header) { h.Set("Authorization", "Bearer "+key.Reveal()) },
		Secrets:      func() []string { return []string{key.Reveal()} },
		Origins:      []string{base.String()},
		Retries:      opts.RateLimitRetries,
		MaxRetryWait: maxAdvisedWait,
		MaxBody:      maxJSONBody,
		MaxErrorBody: maxErrorBody,
		ErrorBody:    errorBody,
		Logger:       opts.Logger,
	})
	if err != nil {
		return nil, err
	}
	p := &Provider{opts: opts, c: &client{base: base.String(), key: key, rc: rc}}
	// The key lives in the client only: fmt prints unexported fields
	// without their Format methods, so a copy in opts would print raw in
	// %v of the Provider.
	p.opts.APIKey = nil
	if opts.DiskQuotaGB > 0 {
		p.disk = newDiskCap(opts.DiskQuotaGB)
	}
	return p, nil
}

// String names the provider and its endpoint, and nothing secret.
func (p *Provider) String() string { return "daytona provider at " + p.c.base }

// GoString is String, so that %#v prints nothing secret either.
func (p *Provider) GoString() string { return p.String() }

// Capabilities reports what the driver supports.
func (p *Provider) Capabilities() driver.Capabilities { return Capabilities() }

// Connect returns a handle to a sandbox by ID or name. A deleted sandbox
// is NotFound; a stopped or archived one (auto-stop) is started again.
func (p *Provider) Connect(ctx context.Context, id string) (driver.Sandbox, error) {
	sb, err := p.get(ctx, id)
	if err != nil {
		return nil, err
	}
	if sb.State == stateStopping || sb.State == stateArchiving || sb.State == statePausing {
		if sb, err = p.waitState(ctx, id, settled); err != nil {
			return nil, err
		}
	}
	switch {
	case gone(sb.State):
		return nil, errdefs.Errorf(errdefs.NotFound, "daytona: sandbox %s is %s", id, sb.State)
	case failed(sb.State):
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "daytona: sandbox %s is in state %s: %s", id, sb.State, sb.ErrorReason)
	case sb.State == stateStarted:
	case sb.State == stateStopped || sb.State == stateArchived || sb.State == statePaused:
		if err := p.c.do(ctx, rest.Call{Method: http.MethodPost, URL: p.sandboxURL(sb.ID, "start")}, nil); err != nil {
			// Auto-delete may have taken it between the read and the start.
			if now, gerr := p.get(ctx, sb.ID); errors.Is(gerr, errdefs.ErrNotFound) || (gerr == nil && gone(now.State)) {
				return nil, errdefs.Errorf(errdefs.NotFound, "daytona: sandbox %s was deleted while being started again", id)
			}
			return nil, err
		}
		if sb, err = p.waitStarted(ctx, sb.ID, true); err != nil {
			return nil, err
		}
	default:
		if sb, err = p.waitStarted(ctx, sb.ID, false); err != nil {
			return nil, err
		}
	}
	return p.newHandle(sb), nil
}

// List returns the sandboxes that carry every given label and are not on
// their way out.
func (p *Provider) List(ctx context.Context, labels map[string]string) ([]driver.Info, error) {
	sbs, err := p.list(ctx, labels)
	if err != nil {
		return nil, err
	}
	var out []driver.Info
	for _, sb := range sbs {
		if gone(sb.State) || !driver.MatchLabels(sb.Labels, labels) {
			continue
		}
		out = append(out, info(sb))
	}
	return out, nil
}

// Delete destroys a sandbox by ID. One already deleted is NotFound.
func (p *Provider) Delete(ctx context.Context, id string) error {
	err := p.deleteByID(ctx, id)
	if p.disk != nil && (err == nil || errors.Is(err, errdefs.ErrNotFound)) {
		p.disk.releaseID(id)
	}
	return err
}

// Close releases idle connections. Sandboxes live on.
func (p *Provider) Close() error {
	if !p.closed.Swap(true) {
		p.c.rc.CloseIdleConnections()
	}
	return nil
}
