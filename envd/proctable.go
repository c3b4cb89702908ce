package envd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"connectrpc.com/connect"

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
// a subscriber that does not read holds the backend's writer back, which in
// turn holds the process back, as a pipe would.
type proc struct {
	pid    int
	tag    *string
	config envdproto.ProcessConfig // what Start was given and left
	bp     BackendProcess          // set once Start returned, before the table has p

	stdout, stderr outWriter

	// stdinSem lets one SendInput at a time through, which keeps input in
	// order; nil when stdin was not requested.
	stdinSem chan struct{}

	mu        sync.Mutex
	stdinOpen bool // guarded by mu
	subs      []*subscriber
	ended     bool
}

// newProc makes a process with its first subscriber already attached, so
// that the Start stream sees every byte of output.
func newProc(cfg envdproto.ProcessConfig, tag *string) (*proc, *subscriber) {
	sub := newSubscriber()
	p := &proc{config: cfg, tag: tag, subs: []*subscriber{sub}}
	p.stdout, p.stderr = outWriter{p: p}, outWriter{p: p, stderr: true}
	return p, sub
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

// publish hands ev to every subscriber; end marks the end event, after
// which nobody may subscribe.
func (p *proc) publish(ev *envdproto.ProcessEvent, end bool) {
	p.mu.Lock()
	subs := append([]*subscriber(nil), p.subs...)
	if end {
		p.ended = true
	}
	p.mu.Unlock()
	for _, s := range subs {
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

// outWriter turns a backend's output into data events.
type outWriter struct {
	p      *proc
	stderr bool
}

func (w *outWriter) Write(b []byte) (int, error) {
	chunk := bytes.Clone(b) // the backend reuses b
	d := &envdproto.DataEvent{Stdout: chunk}
	if w.stderr {
		d = &envdproto.DataEvent{Stderr: chunk}
	}
	w.p.publish(&envdproto.ProcessEvent{Data: d}, false)
	return len(b), nil
}

var errNoStdin = connect.NewError(connect.CodeFailedPrecondition, errors.New("stdin is closed or was not requested"))

// writeStdin hands data to the backend, one write at a time; it gives up
// when ctx ends (a process that does not read) or stdin is closed.
func (p *proc) writeStdin(ctx context.Context, data []byte) error {
	if p.stdinSem == nil {
		return errNoStdin
	}
	select {
	case p.stdinSem <- struct{}{}:
	case <-ctx.Done():
		return connect.NewError(connect.CodeOf(ctx.Err()), ctx.Err())
	}
	defer func() { <-p.stdinSem }()
	p.mu.Lock()
	open := p.stdinOpen
	p.mu.Unlock()
	if !open {
		return errNoStdin
	}
	if err := p.bp.WriteStdin(ctx, data); err != nil {
		if ctx.Err() != nil {
			return connect.NewError(connect.CodeOf(ctx.Err()), ctx.Err())
		}
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("stdin: %w", err))
	}
	return nil
}

// closeStdin closes the process's stdin once; a write in flight fails.
func (p *proc) closeStdin() {
	p.mu.Lock()
	open := p.stdinOpen
	p.stdinOpen = false
	p.mu.Unlock()
	if open {
		p.bp.CloseStdin()
	}
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

// add registers p (a backend without pids, 0, cannot be found by one); it
// counts p for Close even when the table is closing, so that Close waits
// for its end, and then reports false.
func (t *procTable) add(p *proc) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p.pid > 0 {
		t.byPID[p.pid] = p
	}
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

// close refuses new processes from now on.
func (t *procTable) close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
}
