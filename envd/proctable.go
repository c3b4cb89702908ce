package envd

import (
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/berth-sh/berth/envd/envdproto"
)

// subscriber is one stream (Start or Connect) that receives a process's
// events. gone is closed when the stream's handler returns, so that a
// publisher never blocks on a client that left.
type subscriber struct {
	ch   chan *envdproto.ProcessEvent
	gone chan struct{}
}

func newSubscriber() *subscriber {
	return &subscriber{ch: make(chan *envdproto.ProcessEvent, 64), gone: make(chan struct{})}
}

// proc is a started process. Output goes to every subscriber, slowest first:
// a subscriber that does not read holds the pipe reader back, which in turn
// holds the process back, as a pipe would.
type proc struct {
	pid    int
	tag    *string
	config envdproto.ProcessConfig

	stdinMu sync.Mutex
	stdin   *os.File // guarded by mu; nil when not requested or closed

	mu    sync.Mutex
	subs  []*subscriber
	ended bool

	exited   atomic.Bool // the process itself has exited; output may linger
	timedOut atomic.Bool
	done     chan struct{} // closed after the end event was handed out
}

func (p *proc) subscribe() (*subscriber, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return nil, false
	}
	s := newSubscriber()
	p.subs = append(p.subs, s)
	return s, true
}

func (p *proc) unsubscribe(s *subscriber) {
	close(s.gone)
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, x := range p.subs {
		if x == s {
			p.subs = append(p.subs[:i], p.subs[i+1:]...)
			break
		}
	}
}

func (p *proc) snapshot(end bool) []*subscriber {
	p.mu.Lock()
	defer p.mu.Unlock()
	if end {
		p.ended = true
	}
	return append([]*subscriber(nil), p.subs...)
}

func (p *proc) publish(ev *envdproto.ProcessEvent, end bool) {
	for _, s := range p.snapshot(end) {
		select {
		case s.ch <- ev:
		case <-s.gone:
		}
	}
}

func (p *proc) info() envdproto.ProcessInfo {
	cfg := p.config
	return envdproto.ProcessInfo{Config: &cfg, PID: uint32(p.pid), Tag: p.tag}
}

// kill signals the process group, so that children of a shell die too.
// Once reaped the pid may be reused, so an exited process is not signalled.
func (p *proc) kill(sig syscall.Signal) error {
	if p.exited.Load() {
		return syscall.ESRCH
	}
	err := syscall.Kill(-p.pid, sig)
	if err == syscall.ESRCH {
		// Not a group leader any more (it called setsid): the process alone.
		err = syscall.Kill(p.pid, sig)
	}
	return err
}

// procTable is the set of running processes, by pid.
type procTable struct {
	mu     sync.Mutex
	byPID  map[int]*proc
	closed bool
	wg     sync.WaitGroup // one per process until its end is handed out
}

func newProcTable() *procTable { return &procTable{byPID: map[int]*proc{}} }

func (t *procTable) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// add registers p; false means the table is closing and p must be killed
// (it is registered all the same, so that closeAll waits for its end).
func (t *procTable) add(p *proc) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.byPID[p.pid] = p
	t.wg.Add(1)
	return !t.closed
}

func (t *procTable) remove(p *proc) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byPID[p.pid] == p {
		delete(t.byPID, p.pid)
	}
}

// find resolves a selector; nil when nothing matches.
func (t *procTable) find(sel *envdproto.ProcessSelector) *proc {
	if sel == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if sel.PID != nil {
		return t.byPID[int(*sel.PID)]
	}
	if sel.Tag != nil {
		for _, p := range t.byPID {
			if p.tag != nil && *p.tag == *sel.Tag {
				return p
			}
		}
	}
	return nil
}

func (t *procTable) list() []envdproto.ProcessInfo {
	t.mu.Lock()
	out := make([]envdproto.ProcessInfo, 0, len(t.byPID))
	for _, p := range t.byPID {
		out = append(out, p.info())
	}
	t.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}

// closeAll refuses new processes, kills the running ones and waits until
// each has handed out its end event (bounded by wait).
func (t *procTable) closeAll(wait time.Duration) {
	t.mu.Lock()
	t.closed = true
	procs := make([]*proc, 0, len(t.byPID))
	for _, p := range t.byPID {
		procs = append(procs, p)
	}
	t.mu.Unlock()
	for _, p := range procs {
		_ = p.kill(syscall.SIGKILL)
	}
	done := make(chan struct{})
	go func() { t.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(wait):
	}
}
