package retry

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Defaults of Policy's backoff.
const (
	DefaultBase = time.Second
	DefaultMax  = 30 * time.Second
)

// Policy says when an operation is tried again and how long to wait
// first. The zero Policy calls the operation once.
type Policy struct {
	// Attempts bounds the calls of the operation, the first included; 0
	// means no bound but Budget's.
	Attempts int
	// Budget bounds the time: no retry begins once Budget has passed since
	// the first call; 0 means no bound but Attempts'. With neither bound
	// the operation is called once.
	Budget time.Duration
	// Base and Max are the backoff's first wait and its cap (Backoff);
	// zero means DefaultBase and DefaultMax.
	Base, Max time.Duration
	// MaxAdvised is the longest wait a server may advise (a Retry-After)
	// that is waited out; a longer one ends the retries with the error.
	// Zero means any (errdefs caps advice at five minutes).
	MaxAdvised time.Duration
	// Retryable decides which failures are tried again; nil means
	// errdefs.Retryable, the class alone. A Permanent error is never
	// retried, whatever Retryable says.
	Retryable func(error) bool
	// OnRetry, when set, is called before each wait with the failure, the
	// number of the attempt that failed (from 1) and the wait.
	OnRetry func(err error, attempt int, wait time.Duration)
	// Sleep waits between attempts; nil means Sleep. Tests watch it.
	Sleep func(ctx context.Context, d time.Duration) error
}

func (p Policy) withDefaults() Policy {
	if p.Base <= 0 {
		p.Base = DefaultBase
	}
	if p.Max <= 0 {
		p.Max = max(DefaultMax, p.Base)
	}
	if p.Retryable == nil {
		p.Retryable = errdefs.Retryable
	}
	if p.Sleep == nil {
		p.Sleep = Sleep
	}
	return p
}

// Do calls op until it succeeds or p says to stop, and returns op's last
// error. The error is op's own when the attempts or the budget are spent
// or the failure is not retryable; when the wait before a retry was cut
// short by ctx, or a server advised a wait over p.MaxAdvised, the error
// says so and still wraps op's (its class, advice and cause are kept).
func Do(ctx context.Context, p Policy, op func(context.Context) error) error {
	_, err := Value(ctx, p, func(ctx context.Context) (struct{}, error) { return struct{}{}, op(ctx) })
	return err
}

// Value is Do for an operation that returns a value: the value of its last
// call comes back with the error.
func Value[T any](ctx context.Context, p Policy, op func(context.Context) (T, error)) (T, error) {
	p = p.withDefaults()
	start := time.Now()
	for n := 1; ; n++ {
		v, err := op(ctx)
		if err == nil || !p.again(ctx, start, n, err) {
			return v, err
		}
		wait := errdefs.RetryAfterOf(err)
		if p.MaxAdvised > 0 && wait > p.MaxAdvised {
			return v, fmt.Errorf("%w (the advised wait %v is over %v)", err, wait, p.MaxAdvised)
		}
		if wait <= 0 {
			wait = Backoff(n, p.Base, p.Max)
		}
		if p.OnRetry != nil {
			p.OnRetry(err, n, wait)
		}
		if serr := p.Sleep(ctx, wait); serr != nil {
			return v, fmt.Errorf("%w (while waiting %v to retry: %w)", err, wait, serr)
		}
	}
}

// again reports whether the n-th attempt's failure err is tried again.
func (p Policy) again(ctx context.Context, start time.Time, n int, err error) bool {
	switch {
	case ctx.Err() != nil, errdefs.IsPermanent(err), !p.Retryable(err):
		return false
	case p.Attempts <= 0 && p.Budget <= 0:
		return false
	case p.Attempts > 0 && n >= p.Attempts:
		return false
	case p.Budget > 0 && time.Since(start) >= p.Budget:
		return false
	}
	return true
}

// Backoff is the wait before the n-th retry: min(limit, base*2^(n-1)) *
// (0.5 + rand), the formula of Miles' sandbox layer (min(30 s, 2 s *
// 2^(n-1)) there). The jitter spreads the retries of many callers that
// failed together (a provider's throttle) over [d/2, 3d/2).
func Backoff(n int, base, limit time.Duration) time.Duration {
	d := base << min(max(n-1, 0), 30)
	if d > limit || d <= 0 {
		d = limit
	}
	return time.Duration(float64(d) * (0.5 + rand.Float64()))
}

// Sleep waits d or until ctx ends, whichever is first; it returns ctx's
// cause (context.Cause) when ctx ended, and nil otherwise.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return context.Cause(ctx)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
