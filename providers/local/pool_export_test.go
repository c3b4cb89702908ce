package local

import (
	"context"
	"slices"
	"time"
)

// PoolReady waits until every key of p's pool has its ready sandboxes and
// returns their IDs, sorted; tests and benchmarks use it to start from a
// full pool.
func PoolReady(ctx context.Context, p *Provider) ([]string, error) {
	for !p.pool.full() {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	p.pool.mu.Lock()
	defer p.pool.mu.Unlock()
	var ids []string
	for _, b := range p.pool.keys {
		for _, mb := range b.ready {
			ids = append(ids, mb.id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// PoolHanded is how many sandboxes p's Create took from its pool.
func PoolHanded(p *Provider) int { return int(p.pool.handed.Load()) }
