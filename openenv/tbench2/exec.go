package tbench2

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/berth-sh/berth/sandbox"
)

// exec runs a command to its end or the command timeout.
func (e *Env) exec(ctx context.Context, command string) outcome {
	out := newCapped(e.o.MaxOutputBytes)
	res, err := e.sb.Run(ctx, sandbox.Command{
		Args: []string{e.shell, "-c", command}, Stdout: out, Stderr: out, Timeout: e.o.CommandTimeout,
	})
	if errors.Is(err, sandbox.ErrDeadlineExceeded) && ctx.Err() == nil {
		return outcome{output: out.String(), info: map[string]any{"timed_out": true},
			err: fmt.Errorf("command timed out after %v (TB2_COMMAND_TIMEOUT_S)", e.o.CommandTimeout)}
	}
	if err != nil {
		return outcome{output: out.String(), err: err}
	}
	return outcome{output: out.String(), info: map[string]any{"exit_code": res.ExitCode}}
}

// session is a command started with block false: it runs until it exits,
// is killed, or the episode ends, with its stdin open for write actions.
type session struct {
	id    string
	proc  *sandbox.Process
	stdin *io.PipeWriter
	out   *stream
	done  chan struct{}
	code  int
	err   error

	mu      sync.Mutex
	writing bool // a write is blocked on a process that does not read
	cancel  context.CancelFunc
}

// stop ends the session's process (the sandbox's deletion ends it anyway)
// and unblocks a pending write.
func (s *session) stop() {
	s.stdin.CloseWithError(errors.New("session ended"))
	s.cancel()
}

func (s *session) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// status describes the session for info.
func (s *session) status() map[string]any {
	info := map[string]any{"running": !s.exited()}
	if s.exited() {
		info["exit_code"] = s.code
	}
	return info
}

// start runs command in the background under id.
func (e *Env) start(ctx context.Context, id, command string) outcome {
	if old, ok := e.sessions[id]; ok {
		if !old.exited() {
			return outcome{err: fmt.Errorf("session %s is still running; kill it or use another session_id", id)}
		}
		delete(e.sessions, id)
	}
	if len(e.sessions) >= e.o.MaxSessions {
		return outcome{err: fmt.Errorf("at most %d background sessions per episode", e.o.MaxSessions)}
	}
	pr, pw := io.Pipe()
	s := &session{id: id, stdin: pw, out: &stream{max: e.o.MaxOutputBytes}, done: make(chan struct{})}
	// The process outlives this step: its context is the session's own.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	proc, err := e.sb.Exec(sctx, sandbox.Command{Args: []string{e.shell, "-c", command}, Stdin: pr, Stdout: s.out, Stderr: s.out})
	if err != nil {
		cancel()
		pw.Close()
		return outcome{err: err}
	}
	s.proc = proc
	go func() {
		s.code, s.err = proc.Wait(sctx)
		pr.Close()
		close(s.done)
	}()
	if e.sessions == nil {
		e.sessions = map[string]*session{}
	}
	e.sessions[id] = s
	return outcome{output: fmt.Sprintf("Started session %s in the background.", id), info: map[string]any{"pid": proc.PID()}}
}

// writeTimeout bounds a write to a process that is not reading its input.
const writeTimeout = 10 * time.Second

func (e *Env) onSession(ctx context.Context, a Action, id string) outcome {
	s, ok := e.sessions[id]
	if !ok {
		return outcome{err: fmt.Errorf("no session %s: start one with exec and block false", id)}
	}
	switch a.ActionType {
	case ActionWrite:
		if s.exited() {
			return outcome{err: fmt.Errorf("session %s has exited with code %d", id, s.code), info: s.status()}
		}
		s.mu.Lock()
		if s.writing {
			s.mu.Unlock()
			return outcome{err: fmt.Errorf("session %s is not reading its input", id)}
		}
		s.writing = true
		s.mu.Unlock()
		errc := make(chan error, 1)
		go func() {
			_, err := io.WriteString(s.stdin, a.Command+"\n")
			s.mu.Lock()
			s.writing = false
			s.mu.Unlock()
			errc <- err
		}()
		t := time.NewTimer(writeTimeout)
		defer t.Stop()
		select {
		case err := <-errc:
			if err != nil {
				return outcome{err: fmt.Errorf("writing to session %s: %w", id, err)}
			}
		case <-t.C:
			return outcome{err: fmt.Errorf("session %s did not read its input within %v", id, writeTimeout)}
		case <-ctx.Done():
			return outcome{err: ctx.Err()}
		}
		return outcome{output: fmt.Sprintf("Wrote to session %s.", id), info: s.status()}
	case ActionView:
		return outcome{output: s.out.take(), info: s.status()}
	case ActionWait:
		limit := e.o.CommandTimeout
		if a.WaitSeconds != nil && *a.WaitSeconds > 0 {
			limit = min(limit, time.Duration(*a.WaitSeconds*float64(time.Second)))
		}
		t := time.NewTimer(limit)
		defer t.Stop()
		select {
		case <-s.done:
		case <-t.C:
		case <-ctx.Done():
			return outcome{err: ctx.Err()}
		}
		return outcome{output: s.out.take(), info: s.status()}
	default: // kill
		var err error
		if !s.exited() {
			err = s.proc.Signal(ctx, sandbox.SIGKILL)
			if errors.Is(err, sandbox.ErrNotFound) {
				err = nil // it exited meanwhile
			}
		}
		if err != nil {
			return outcome{err: fmt.Errorf("killing session %s: %w", id, err)}
		}
		s.stop()
		delete(e.sessions, id)
		return outcome{output: fmt.Sprintf("Killed session %s", id)}
	}
}
