package main

import (
	"context"
	"log/slog"
	"time"
)

// reapEvery is how often `berth serve` runs its provider's reaper.
const reapEvery = time.Minute

// reaper is what reapLoop needs of a provider (sandbox.Provider).
type reaper interface {
	Reap(ctx context.Context) ([]string, error)
}

// reapLoop runs p's reaper every interval until ctx ends, so that a server
// enforces the provider-side TTL of sandboxes whose creator died (the k8s
// provider's TTL annotation); providers without a reaper do nothing.
func reapLoop(ctx context.Context, p reaper, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ids, err := p.Reap(ctx)
		if len(ids) > 0 {
			log.Info("reaped expired sandboxes", "count", len(ids))
		}
		if err != nil && ctx.Err() == nil {
			log.Warn("reaping expired sandboxes failed", "error", err)
		}
	}
}
