package dataplane

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sort"
	"sync"

	"connectrpc.com/connect"

	"github.com/berth-sh/berth/envd/envdproto"
	"github.com/berth-sh/berth/sandbox"
)

// subscriber is one Start or Connect stream. gone closes when the stream's
// handler returns, so that a publisher never blocks on a client that left.
type subscriber struct {
	ch   chan *envdproto.ProcessEvent
	gone chan struct{}
}

func newSubscriber() *subscriber {
	return &subscriber{ch: make(chan *envdproto.ProcessEvent, 64), gone: make(chan struct{})}
}

// proc is a process started through this data plane. Output goes to every
// subscriber; one that does not read holds the process's output back, as a
// pipe would, until its stream ends.
type proc struct {
	pid    int
	tag    *string
	config envdproto.ProcessConfig
	handle *sandbox.Process

	stdinSem chan struct{}  // one SendInput at a time keeps input in order
	stdin    *io.PipeWriter // guarded by mu; nil when not requested or closed

	mu    sync.Mutex
	subs  []*subscriber
	ended bool
	done  chan struct{} // closed after the end event was handed out
}

func newProc(cfg envdproto.ProcessConfig, tag *string) *proc {
	return &proc{config: cfg, tag: tag, stdinSem: make(chan struct{}, 1), done: make(chan struct{})}
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

// publish hands ev to every subscriber; last marks the end event, after
// which nobody may subscribe.
func (p *proc) publish(ev *envdproto.ProcessEvent, last bool) {
	p.mu.Lock()
	subs := append([]*subscriber(nil), p.subs...)
	if last {
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

// outWriter turns the process's output into data events.
type outWriter struct {
	p      *proc
	stderr bool
}

func (w outWriter) Write(b []byte) (int, error) {
	chunk := bytes.Clone(b) // the caller reuses b
	d := &envdproto.DataEvent{Stdout: chunk}
	if w.stderr {
		d = &envdproto.DataEvent{Stderr: chunk}
	}
	w.p.publish(&envdproto.ProcessEvent{Data: d}, false)
	return len(b), nil
}

// writeStdin delivers data to the process's stdin unless ctx ends first; a
// write that gives up stays pending until the process reads or ends.
func (p *proc) writeStdin(ctx context.Context, data []byte) error {
	select {
	case p.stdinSem <- struct{}{}:
	case <-ctx.Done():
		return connect.NewError(connect.CodeOf(ctx.Err()), ctx.Err())
	}
	p.mu.Lock()
	w := p.stdin
	p.mu.Unlock()
	if w == nil {
		<-p.stdinSem
		return connect.NewError(connect.CodeFailedPrecondition, errors.New("stdin is closed or was not requested"))
	}
	res := make(chan error, 1)
	go func() {
		_, err := w.Write(data)
		<-p.stdinSem
		res <- err
	}()
	select {
	case err := <-res:
		if err != nil {
			return connect.NewError(connect.CodeFailedPrecondition, errors.New("stdin is closed"))
		}
		return nil
	case <-ctx.Done():
		return connect.NewError(connect.CodeOf(ctx.Err()), ctx.Err())
	}
}

func (p *proc) closeStdin() {
	p.mu.Lock()
	w := p.stdin
	p.stdin = nil
	p.mu.Unlock()
	if w != nil {
		_ = w.Close()
	}
}

// procTable holds the running processes by pid.
type procTable struct {
	mu     sync.Mutex
	byPID  map[int]*proc
	closed bool
	wg     sync.WaitGroup
}

func newProcTable() *procTable { return &procTable{byPID: map[int]*proc{}} }

// add registers p; it fails once the table is closed.
func (t *procTable) add(p *proc) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	if p.pid > 0 {
		t.byPID[p.pid] = p
	}
	return true
}

func (t *procTable) remove(p *proc) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byPID[p.pid] == p {
		delete(t.byPID, p.pid)
	}
}

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
	defer t.mu.Unlock()
	out := make([]envdproto.ProcessInfo, 0, len(t.byPID))
	for _, p := range t.byPID {
		cfg := p.config
		out = append(out, envdproto.ProcessInfo{PID: uint32(p.pid), Tag: p.tag, Config: &cfg})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}

func (t *procTable) all() []*proc {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	out := make([]*proc, 0, len(t.byPID))
	for _, p := range t.byPID {
		out = append(out, p)
	}
	return out
}
