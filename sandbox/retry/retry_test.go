package retry

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// failing returns an op that fails with err every time, counting calls.
func failing(err error, calls *int) func(context.Context) error {
	return func(context.Context) error {
		*calls++
		return err
	}
}

// noWait is a Policy.Sleep that records the waits and waits none.
func noWait(waits *[]time.Duration) func(context.Context, time.Duration) error {
	return func(_ context.Context, d time.Duration) error {
		*waits = append(*waits, d)
		return nil
	}
}

// TestRetriesOnClassOnly: the class decides, never the text; a Permanent
// error is not retried even where the caller's own Retryable says yes; the
// attempts bound the calls, and the zero Policy calls once.
func TestRetriesOnClassOnly(t *testing.T) {
	yes := func(error) bool { return true }
	for _, tc := range []struct {
		name  string
		err   error
		p     Policy
		calls int
	}{
		{"a transient outage", errdefs.Errorf(errdefs.Unavailable, "connection reset"), Policy{Attempts: 3}, 3},
		{"a throttle", errdefs.Errorf(errdefs.ResourceExhausted, "slow down"), Policy{Attempts: 4}, 4},
		{"text that reads like a throttle", errors.New("HTTP 429: rate limit exceeded"), Policy{Attempts: 3}, 1},
		{"a timeout", errdefs.Errorf(errdefs.DeadlineExceeded, "create timed out"), Policy{Attempts: 3}, 1},
		{"a refused request", errdefs.Errorf(errdefs.InvalidArgument, "bad image"), Policy{Attempts: 3}, 1},
		{"a full disk", errdefs.WithPermanent(errdefs.Errorf(errdefs.ResourceExhausted, "disk full")), Policy{Attempts: 3}, 1},
		{"Permanent beats the caller's Retryable", errdefs.WithPermanent(errors.New("x")), Policy{Attempts: 3, Retryable: yes}, 1},
		{"the caller's Retryable", errors.New("at capacity"), Policy{Attempts: 3, Retryable: yes}, 3},
		{"the zero Policy calls once", errdefs.Errorf(errdefs.Unavailable, "x"), Policy{}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls int
			var waits []time.Duration
			tc.p.Sleep = noWait(&waits)
			err := Do(context.Background(), tc.p, failing(tc.err, &calls))
			if calls != tc.calls || len(waits) != calls-1 {
				t.Errorf("%d calls, %d waits; want %d calls", calls, len(waits), tc.calls)
			}
			if err != tc.err {
				t.Errorf("err = %v, want op's own error %v", err, tc.err)
			}
		})
	}
}

// TestAdvisedWait: a server's advice is the wait, exactly; advice over
// MaxAdvised ends the retries at once with an error that says so and
// keeps the class and the advice.
func TestAdvisedWait(t *testing.T) {
	advised := errdefs.WithRetryAfter(errdefs.Errorf(errdefs.ResourceExhausted, "slow down"), 1500*time.Millisecond)
	var calls int
	var waits []time.Duration
	err := Do(context.Background(), Policy{Attempts: 3, Base: time.Millisecond, Sleep: noWait(&waits)}, failing(advised, &calls))
	if calls != 3 || fmt.Sprint(waits) != "[1.5s 1.5s]" || err != advised {
		t.Errorf("%d calls, waits %v, err %v; want 3 calls 1.5 s apart", calls, waits, err)
	}

	calls, waits = 0, nil
	err = Do(context.Background(), Policy{Attempts: 3, MaxAdvised: time.Second, Sleep: noWait(&waits)}, failing(advised, &calls))
	if calls != 1 || len(waits) != 0 {
		t.Errorf("advice over MaxAdvised: %d calls, waits %v", calls, waits)
	}
	if !errors.Is(err, advised) || errdefs.ClassOf(err) != errdefs.ResourceExhausted || errdefs.RetryAfterOf(err) != 1500*time.Millisecond {
		t.Errorf("advice over MaxAdvised: %v (class %v)", err, errdefs.ClassOf(err))
	}
}

// TestBackoffBetweenAttempts: without advice the n-th wait is Backoff(n),
// and OnRetry sees each failed attempt with its wait before it is waited.
func TestBackoffBetweenAttempts(t *testing.T) {
	var calls int
	var waits, seen []time.Duration
	var attempts []int
	p := Policy{Attempts: 5, Base: 100 * time.Millisecond, Max: 300 * time.Millisecond, Sleep: noWait(&waits),
		OnRetry: func(_ error, n int, d time.Duration) { attempts, seen = append(attempts, n), append(seen, d) }}
	_ = Do(context.Background(), p, failing(errdefs.Errorf(errdefs.Unavailable, "x"), &calls))
	if fmt.Sprint(attempts) != "[1 2 3 4]" || fmt.Sprint(seen) != fmt.Sprint(waits) {
		t.Fatalf("OnRetry saw attempts %v waits %v; slept %v", attempts, seen, waits)
	}
	for i, d := range waits {
		want := min(300*time.Millisecond, 100*time.Millisecond<<i)
		if d < want/2 || d >= want*3/2 {
			t.Errorf("wait %d = %v, want within [%v, %v)", i+1, d, want/2, want*3/2)
		}
	}
}

// TestBudgetBoundsTime: with a Budget and no Attempts, the op is tried
// until the budget is spent, and no retry follows a failure after it.
func TestBudgetBoundsTime(t *testing.T) {
	const budget = 60 * time.Millisecond
	before := time.Now()
	var first time.Time
	var failed []time.Duration // since the first attempt began
	err := Do(context.Background(), Policy{Budget: budget, Base: 5 * time.Millisecond, Max: 10 * time.Millisecond},
		func(context.Context) error {
			if first.IsZero() {
				first = time.Now()
			}
			failed = append(failed, time.Since(first))
			return errdefs.Errorf(errdefs.Unavailable, "x")
		})
	if errdefs.ClassOf(err) != errdefs.Unavailable || len(failed) < 2 {
		t.Fatalf("%d attempts, err %v", len(failed), err)
	}
	if took := time.Since(before); took < budget {
		t.Errorf("gave up after %v, before the %v budget", took, budget)
	}
	// Every failure that was retried came before the budget ran out.
	if f := failed[len(failed)-2]; f >= budget {
		t.Errorf("a failure at %v was retried, past the %v budget", f, budget)
	}
}

// TestWaitCutShortByCtx: a cancel during the wait returns at once; the
// error is op's (class kept) and the ctx's cause, both reachable.
func TestWaitCutShortByCtx(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("the job was stopped")
	opErr := errdefs.Errorf(errdefs.Unavailable, "connection reset")
	var calls int
	// The cancel comes as the wait begins.
	p := Policy{Attempts: 3, Base: time.Hour, Max: time.Hour, OnRetry: func(error, int, time.Duration) { cancel(stop) }}
	start := time.Now()
	err := Do(ctx, p, failing(opErr, &calls))
	if time.Since(start) > time.Minute {
		t.Errorf("the wait was not cut short: %v", time.Since(start))
	}
	if calls != 1 || !errors.Is(err, opErr) || !errors.Is(err, stop) || errdefs.ClassOf(err) != errdefs.Unavailable {
		t.Errorf("%d calls, err %v", calls, err)
	}

	// A ctx already ended after a failure: op's own error, no wait.
	calls = 0
	if err := Do(ctx, Policy{Attempts: 3}, failing(opErr, &calls)); err != opErr || calls != 1 {
		t.Errorf("ended ctx: %d calls, err %v", calls, err)
	}
}

func TestValueReturnsTheLastValue(t *testing.T) {
	n := 0
	v, err := Value(context.Background(), Policy{Attempts: 3, Sleep: noWait(new([]time.Duration))}, func(context.Context) (int, error) {
		n++
		if n < 3 {
			return n, errdefs.Errorf(errdefs.Unavailable, "x")
		}
		return n * 10, nil
	})
	if v != 30 || err != nil {
		t.Errorf("Value = %d, %v; want 30 after two retries", v, err)
	}
}

// TestBackoffBounds: the n-th wait lies in [d/2, 3d/2) for d =
// min(max, base*2^(n-1)), shifts past 30 doublings saturate at the cap,
// and the waits are spread, not one value.
func TestBackoffBounds(t *testing.T) {
	base, limit := 2*time.Second, 30*time.Second
	for n := 0; n <= 40; n++ {
		want := min(limit, base<<min(max(n-1, 0), 30))
		seen := map[time.Duration]bool{}
		for range 50 {
			d := Backoff(n, base, limit)
			if d < want/2 || d >= want*3/2 {
				t.Fatalf("Backoff(%d) = %v, want within [%v, %v)", n, d, want/2, want*3/2)
			}
			seen[d] = true
		}
		if len(seen) < 10 {
			t.Errorf("Backoff(%d): %d distinct waits of 50: not jittered", n, len(seen))
		}
	}
}

func TestSleep(t *testing.T) {
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Errorf("Sleep = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) || time.Since(start) > time.Minute {
		t.Errorf("Sleep on an ended ctx = %v after %v", err, time.Since(start))
	}
	if err := Sleep(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep(0) on an ended ctx = %v", err)
	}
	if err := Sleep(context.Background(), -time.Second); err != nil {
		t.Errorf("Sleep(<0) = %v", err)
	}
}
