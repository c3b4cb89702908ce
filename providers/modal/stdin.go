package modal

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// The SDK writes a process's stdin (and its end) with context.Background()
// and retries transient failures, about ten seconds of them; Detach does
// not stop that. A stdin copy still running when a sandbox's server goes
// away would go on calling it long after Close. So stdin goes through a
// gate: no call starts once the process has ended, its handle has closed
// or the provider has closed, and Provider.Close waits, bounded, for the
// calls already started.

// stdinCloseWait bounds how long Close waits for stdin calls in flight.
const stdinCloseWait = 15 * time.Second

// stdinGate counts a provider's stdin calls in flight.
type stdinGate struct {
	mu     sync.Mutex
	closed bool
	calls  sync.WaitGroup
}

// enter admits a call unless the gate has closed; leave ends it.
func (g *stdinGate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.calls.Add(1)
	return true
}

func (g *stdinGate) leave() { g.calls.Done() }

// close refuses new calls and waits up to d for those in flight; false
// when some are still running.
func (g *stdinGate) close(d time.Duration) bool {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	done := make(chan struct{})
	go func() {
		g.calls.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// gatedStdin is a process's stdin behind the provider's gate.
type gatedStdin struct {
	w    io.WriteCloser // the SDK's
	gate *stdinGate
	done <-chan struct{} // the process has ended
	ctx  context.Context // the handle's
}

var errStdinGone = errdefs.Errorf(errdefs.InvalidArgument, "modal: stdin: the process has ended or its handle was closed")

func (g *gatedStdin) open() bool {
	select {
	case <-g.done:
		return false
	case <-g.ctx.Done():
		return false
	default:
	}
	return g.gate.enter()
}

func (g *gatedStdin) Write(b []byte) (int, error) {
	if !g.open() {
		return 0, errStdinGone
	}
	defer g.gate.leave()
	return g.w.Write(b)
}

func (g *gatedStdin) Close() error {
	if !g.open() {
		return errStdinGone
	}
	defer g.gate.leave()
	return g.w.Close()
}
