package driver

import "time"

// Limits are a provider's create limits, which runners respect through
// sandbox/throttle's Gate: creates in flight, a create rate, live
// sandboxes, and how a throttled or transient create is retried. A
// registry entry states its provider's (registry.Entry.Limits); users may
// override them. Zero values take the gate's defaults, from the facts the
// layer follows: 4 creates in flight, 8 retries, backoff
// min(30 s, 2 s * 2^(n-1)) * (0.5 + rand) (sandbox/retry.Backoff).
type Limits struct {
	CreateConcurrency int           // creates in flight at once
	CreatesPerSecond  float64       // 0: no rate limit
	MaxLive           int           // sandboxes alive at once; 0: no cap
	Retries           int           // retries of a retryable create failure; <0: none
	BackoffBase       time.Duration // first backoff (2 s)
	BackoffMax        time.Duration // backoff ceiling (30 s)
}
