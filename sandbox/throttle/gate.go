package throttle

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/berth-sh/berth/sandbox"
)

// Limits configure a Gate. Zero values take the defaults from the facts the
// layer follows: 4 creates in flight, 8 retries, backoff
// min(30 s, 2 s * 2^(n-1)) * (0.5 + rand).
type Limits struct {
	CreateConcurrency int           // creates in flight at once
	CreatesPerSecond  float64       // 0: no rate limit
	MaxLive           int           // sandboxes alive at once; 0: no cap
	Retries           int           // retries of a retryable create failure; <0: none
	BackoffBase       time.Duration // first backoff (2 s)
	BackoffMax        time.Duration // backoff ceiling (30 s)
}

func (l Limits) withDefaults() Limits {
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
	l        Limits
	creating chan struct{}
	live     chan struct{} // nil when unbounded
	ticks    chan struct{} // nil when no rate limit
	stop     chan struct{}
}

// New returns a Gate; Close stops its rate ticker.
func New(l Limits) *Gate {
	l = l.withDefaults()
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
	for attempt := 0; ; attempt++ {
		sb, err = g.createOnce(ctx, p, spec)
		if err == nil {
			return sb, release, nil
		}
		if attempt >= g.l.Retries || !sandbox.Retryable(err) || ctx.Err() != nil {
			release()
			return nil, nil, err
		}
		// The slot is free while we wait: other creates may go.
		if werr := Sleep(ctx, g.backoff(attempt+1, err)); werr != nil {
			release()
			return nil, nil, errors.Join(err, werr)
		}
	}
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

// backoff is the provider's advised wait when its error carries one
// (errdefs.Error.RetryAfter), else the jittered exponential backoff.
func (g *Gate) backoff(n int, err error) time.Duration {
	if d := sandbox.RetryAfterOf(err); d > 0 {
		return d
	}
	return Backoff(n, g.l.BackoffBase, g.l.BackoffMax)
}

// Backoff is min(max, base*2^(n-1)) * (0.5 + rand) for the n-th retry.
func Backoff(n int, base, max time.Duration) time.Duration {
	d := base << min(n-1, 30)
	if d > max || d <= 0 {
		d = max
	}
	return time.Duration(float64(d) * (0.5 + rand.Float64()))
}

// Sleep waits d or until ctx ends, whichever is first; it returns ctx's
// error when ctx ended.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
