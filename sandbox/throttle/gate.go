package throttle

import (
	"context"
	"time"

	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/retry"
)

// withDefaults fills the zero fields of l (see driver.Limits).
func withDefaults(l sandbox.Limits) sandbox.Limits {
	if l.CreateConcurrency <= 0 {
		l.CreateConcurrency = 4
	}
	if l.Retries == 0 {
		l.Retries = 8
	}
	if l.Retries < 0 {
		l.Retries = 0
	}
	if l.BackoffBase <= 0 {
		l.BackoffBase = 2 * time.Second
	}
	if l.BackoffMax <= 0 {
		l.BackoffMax = 30 * time.Second
	}
	return l
}

// Gate admits creates on one provider. It is safe for concurrent use.
type Gate struct {
	l        sandbox.Limits
	creating chan struct{}
	live     chan struct{} // nil when unbounded
	ticks    chan struct{} // nil when no rate limit
	stop     chan struct{}
}

// New returns a Gate; Close stops its rate ticker.
func New(l sandbox.Limits) *Gate {
	l = withDefaults(l)
	g := &Gate{l: l, creating: make(chan struct{}, l.CreateConcurrency), stop: make(chan struct{})}
	if l.MaxLive > 0 {
		g.live = make(chan struct{}, l.MaxLive)
	}
	if l.CreatesPerSecond > 0 {
		g.ticks = make(chan struct{}, 1)
		go g.tick(time.Duration(float64(time.Second) / l.CreatesPerSecond))
	}
	return g
}

func (g *Gate) tick(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	g.ticks <- struct{}{} // the first create goes at once
	for {
		select {
		case <-g.stop:
			return
		case <-t.C:
			select {
			case g.ticks <- struct{}{}:
			default:
			}
		}
	}
}

// Close stops the gate's ticker.
func (g *Gate) Close() { close(g.stop) }

// Create creates a sandbox through the gate. The returned release must be
// called once the sandbox is deleted, to free its live slot.
func (g *Gate) Create(ctx context.Context, p *sandbox.Provider, spec sandbox.Spec) (sb *sandbox.Sandbox, release func(), err error) {
	if g.live != nil {
		select {
		case g.live <- struct{}{}:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
	release = func() {}
	if g.live != nil {
		var once bool
		release = func() {
			if !once {
				once = true
				<-g.live
			}
		}
	}
	// The creating slot is free while the retry waits: other creates may
	// go. The live slot is kept: the sandbox is still wanted.
	sb, err = retry.Value(ctx, retry.Policy{Attempts: g.l.Retries + 1, Base: g.l.BackoffBase, Max: g.l.BackoffMax},
		func(ctx context.Context) (*sandbox.Sandbox, error) { return g.createOnce(ctx, p, spec) })
	if err != nil {
		release()
		return nil, nil, err
	}
	return sb, release, nil
}

func (g *Gate) createOnce(ctx context.Context, p *sandbox.Provider, spec sandbox.Spec) (*sandbox.Sandbox, error) {
	if g.ticks != nil {
		select {
		case <-g.ticks:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	select {
	case g.creating <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-g.creating }()
	return p.Create(ctx, spec)
}
