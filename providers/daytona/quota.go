package daytona

import (
	"context"
	"sync"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// diskCap keeps the disk of the sandboxes a Provider holds under the
// account's total disk quota: a create takes its sandbox's disk GB and waits
// while they are not free; a delete gives them back.
type diskCap struct {
	total int

	mu      sync.Mutex
	used    int
	held    map[string]int // sandbox ID -> GB
	changed chan struct{}  // closed and replaced whenever used drops
}

func newDiskCap(totalGB int) *diskCap {
	return &diskCap{total: totalGB, held: map[string]int{}, changed: make(chan struct{})}
}

// acquire takes gb, waiting for room. A sandbox larger than the whole quota
// can never fit: that is a permanent ResourceExhausted.
func (d *diskCap) acquire(ctx context.Context, gb int) error {
	if gb > d.total {
		return errdefs.WithPermanent(errdefs.Errorf(errdefs.ResourceExhausted,
			"daytona: a sandbox of %d GB disk does not fit the %d GB total disk quota", gb, d.total))
	}
	for {
		d.mu.Lock()
		if d.used+gb <= d.total {
			d.used += gb
			d.mu.Unlock()
			return nil
		}
		ch := d.changed
		d.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return errdefs.Errorf(errdefs.ResourceExhausted, "daytona: waiting for %d GB under the %d GB total disk quota: %w", gb, d.total, ctx.Err())
		}
	}
}

// bind records that sandbox id holds gb taken by acquire.
func (d *diskCap) bind(id string, gb int) {
	d.mu.Lock()
	d.held[id] += gb
	d.mu.Unlock()
}

// release gives back gb taken by acquire and not bound.
func (d *diskCap) release(gb int) {
	d.mu.Lock()
	d.used -= gb
	close(d.changed)
	d.changed = make(chan struct{})
	d.mu.Unlock()
}

// releaseID gives back what sandbox id holds, if anything.
func (d *diskCap) releaseID(id string) {
	d.mu.Lock()
	gb, ok := d.held[id]
	delete(d.held, id)
	d.mu.Unlock()
	if ok {
		d.release(gb)
	}
}
