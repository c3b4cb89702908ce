package fakeprovider

import (
	"context"
	"sync"
	"syscall"
	"time"
)

// live is what this OS process knows about running sandboxes, shared by all
// provider values: their processes (so any handle's Delete kills them) and
// their TTL timers. Keys are absolute sandbox directories.
var live = struct {
	mu     sync.Mutex
	procs  map[string]map[*process]struct{}
	timers map[string]*time.Timer
}{procs: map[string]map[*process]struct{}{}, timers: map[string]*time.Timer{}}

// killWait bounds how long a delete waits for killed processes to be reaped:
// a process that escaped its group could otherwise hold the pipes forever.
const killWait = 10 * time.Second

// schedule arms the TTL timer of a sandbox for at, replacing an earlier one.
func schedule(dir string, at time.Time) {
	live.mu.Lock()
	defer live.mu.Unlock()
	if t := live.timers[dir]; t != nil {
		t.Stop()
	}
	live.timers[dir] = time.AfterFunc(time.Until(at), func() { expire(dir) })
}

func unschedule(dir string) {
	live.mu.Lock()
	defer live.mu.Unlock()
	if t := live.timers[dir]; t != nil {
		t.Stop()
		delete(live.timers, dir)
	}
}

// expire runs when a TTL timer fires: liveMeta destroys the sandbox if its
// deadline has passed; if SetTimeout moved it meanwhile, the timer is armed
// again.
func expire(dir string) {
	m, err := liveMeta(dir)
	if err == nil {
		schedule(dir, m.ExpiresAt)
	}
}

func register(dir string, p *process) {
	live.mu.Lock()
	defer live.mu.Unlock()
	if live.procs[dir] == nil {
		live.procs[dir] = map[*process]struct{}{}
	}
	live.procs[dir][p] = struct{}{}
}

func unregister(dir string, p *process) {
	live.mu.Lock()
	defer live.mu.Unlock()
	delete(live.procs[dir], p)
	if len(live.procs[dir]) == 0 {
		delete(live.procs, dir)
	}
}

// killAll kills every process of a sandbox and waits until they are reaped
// (bounded by ctx and killWait), so that a deleted sandbox leaves nothing
// running.
func killAll(ctx context.Context, dir string) {
	live.mu.Lock()
	var ps []*process
	for p := range live.procs[dir] {
		ps = append(ps, p)
	}
	live.mu.Unlock()
	for _, p := range ps {
		p.killGroup(syscall.SIGKILL)
	}
	timeout := time.NewTimer(killWait)
	defer timeout.Stop()
	for _, p := range ps {
		select {
		case <-p.done:
		case <-ctx.Done():
			return
		case <-timeout.C:
			return
		}
	}
}
