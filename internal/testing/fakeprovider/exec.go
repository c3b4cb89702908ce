package fakeprovider

import (
	"context"
	"errors"
	"io"
	"sync"
	"syscall"

	"github.com/berth-sh/berth/internal/hostproc"
	"github.com/berth-sh/berth/internal/testing/fakeengine"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// process is one started command: the engine's, with the faults.
type process struct {
	ep       *fakeengine.Proc
	dropped  chan struct{} // closed when DropStream cut stdout
	dropOnce sync.Once
	faults   *Injector
	timeout  error // DeadlineExceeded when the command ran out of time
}

var _ driver.Process = (*process)(nil)

func (s *sandbox) Exec(ctx context.Context, c driver.Command) (driver.Process, error) {
	faults := s.p.opts.Faults.Get()
	if faults.HangExec {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	p := &process{dropped: make(chan struct{}), faults: s.p.opts.Faults}
	cmd := fakeengine.Command{
		Args: c.Args, Dir: c.Dir, Env: c.Env, Stdin: c.Stdin != nil, Stdout: c.Stdout, Stderr: c.Stderr,
		Timeout: c.Timeout, KillGroupAtExit: true,
		OnExit: func(ex hostproc.Exit) {
			if ex.TimedOut {
				p.timeout = errdefs.Errorf(errdefs.DeadlineExceeded, "command timed out after %v", c.Timeout)
			}
			if faults.DropStream {
				p.drop()
			}
		},
	}
	if faults.DropStream {
		cmd.Stdout = &dropWriter{w: c.Stdout, p: p}
	}
	ep, err := s.sb.Exec(ctx, cmd)
	if err != nil {
		return nil, mapErr(err)
	}
	p.ep = ep
	if in := ep.Stdin(); in != nil {
		// Not waited for: a caller's Stdin that never reaches EOF must not
		// keep Wait from returning; the pipe closes at the exit, which ends
		// the copy at its next write.
		go func() {
			_, _ = io.Copy(in, c.Stdin)
			_ = in.Close()
		}()
	}
	return p, nil
}

// dropWriter is stdout under DropStream: the first chunk is delivered,
// then the stream is cut and the rest discarded.
type dropWriter struct {
	w    io.Writer
	p    *process
	once sync.Once
}

func (d *dropWriter) Write(b []byte) (int, error) {
	d.once.Do(func() {
		if d.w != nil {
			_, _ = d.w.Write(b)
		}
		d.p.drop()
	})
	return len(b), nil
}

func (p *process) drop() { p.dropOnce.Do(func() { close(p.dropped) }) }

func (p *process) PID() int { return p.ep.PID() }

func (p *process) Wait(ctx context.Context) (int, error) {
	if p.faults.Get().HangExec {
		<-ctx.Done()
		return -1, ctx.Err()
	}
	select {
	case <-p.dropped: // first: a cut stream fails Wait even after the exit
	default:
		select {
		case <-p.ep.Done():
		case <-p.dropped:
		case <-ctx.Done():
			return -1, ctx.Err()
		}
	}
	select {
	case <-p.dropped:
		return -1, errdefs.Errorf(errdefs.Unavailable, "output stream of process %d dropped", p.PID())
	default:
	}
	if p.timeout != nil {
		return -1, p.timeout
	}
	return p.ep.Exit().Code, nil
}

var signals = map[driver.Signal]syscall.Signal{
	"SIGTERM": syscall.SIGTERM, "SIGKILL": syscall.SIGKILL, "SIGINT": syscall.SIGINT,
	"SIGHUP": syscall.SIGHUP, "SIGQUIT": syscall.SIGQUIT, "SIGUSR1": syscall.SIGUSR1,
	"SIGUSR2": syscall.SIGUSR2, "SIGSTOP": syscall.SIGSTOP, "SIGCONT": syscall.SIGCONT,
}

// Signal goes to the command's whole process group: "sh -c" and what it
// started are one command to the caller.
func (p *process) Signal(_ context.Context, sig driver.Signal) error {
	s, ok := signals[sig]
	if !ok {
		return errdefs.Errorf(errdefs.InvalidArgument, "unknown signal %q", sig)
	}
	select {
	case <-p.ep.Done():
		return errdefs.Errorf(errdefs.NotFound, "process %d has ended", p.PID())
	default:
	}
	if err := p.ep.Signal(s); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return errdefs.Errorf(errdefs.NotFound, "process %d has ended", p.PID())
		}
		return errdefs.Classify(errdefs.Unavailable, err)
	}
	return nil
}
