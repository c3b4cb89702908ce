package main

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

type countingReaper struct{ n atomic.Int32 }

func (c *countingReaper) Reap(context.Context) ([]string, error) {
	if c.n.Add(1) == 2 {
		return nil, errors.New("transient")
	}
	return []string{"sb-1"}, nil
}

// The loop keeps reaping through a failed round and stops with its context.
func TestReapLoop(t *testing.T) {
	var r countingReaper
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { reapLoop(ctx, &r, 5*time.Millisecond, slog.New(slog.DiscardHandler)); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for r.n.Load() < 4 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if n := r.n.Load(); n < 4 {
		t.Fatalf("%d reaps, want at least 4 (the loop stopped at the failure?)", n)
	}
	stopped := r.n.Load()
	time.Sleep(30 * time.Millisecond)
	if r.n.Load() != stopped {
		t.Errorf("the loop reaped after its context ended")
	}
}
