package modal

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	sdk "github.com/modal-labs/modal-client/go"

	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

var _ driver.Process = (*process)(nil)

// process is a started exec. Its output is drained by two goroutines, one
// per stream, from the moment it starts: a Modal process whose output is not
// read blocks. done closes once the exit status is known and both streams
// are delivered.
type process struct {
	timeout  time.Duration
	deadline time.Time // zero without a timeout
	done     chan struct{}

	code int
	err  error
}

// Exec starts cmd. The command's timeout goes to Modal in whole seconds
// (rounded up), which kills the process; Wait reports DeadlineExceeded at
// the exact timeout.
func (s *sandbox) Exec(ctx context.Context, cmd driver.Command) (driver.Process, error) {
	if cmd.User != "" && cmd.User != "root" {
		return nil, errUser
	}
	params := &sdk.SandboxExecParams{Workdir: cmd.Dir, Env: cmd.Env}
	if cmd.Stdout == nil {
		params.Stdout = sdk.Ignore
	}
	if cmd.Stderr == nil {
		params.Stderr = sdk.Ignore
	}
	p := &process{timeout: cmd.Timeout, done: make(chan struct{})}
	if cmd.Timeout > 0 {
		params.Timeout = ceilSeconds(cmd.Timeout)
	}
	cp, err := s.sb.Exec(ctx, cmd.Args, params)
	if err != nil {
		return nil, classify(err)
	}
	if cmd.Timeout > 0 {
		p.deadline = time.Now().Add(cmd.Timeout)
	}
	s.p.wg.Add(1)
	go p.run(s.ctx, cp, cmd, &s.p.wg, &s.p.stdin)
	return p, nil
}

// run feeds stdin, drains the outputs and waits for the exit status. ctx is
// the handle's: closing the handle or the provider stops the drains.
func (p *process) run(ctx context.Context, cp *sdk.ContainerProcess, cmd driver.Command, wg *sync.WaitGroup, gate *stdinGate) {
	defer wg.Done()
	defer close(p.done)
	// The SDK reads output on its own background context; closing the
	// readers is what ends a read when we give up.
	stop := context.AfterFunc(ctx, func() {
		cp.Stdout.Close()
		cp.Stderr.Close()
	})
	defer stop()

	// Not waited for: a caller's Stdin that never ends must not hold up Wait.
	// Once the process has ended (or the handle closed), writes are refused
	// without a call and the copy ends.
	in := &gatedStdin{w: cp.Stdin, gate: gate, done: p.done, ctx: ctx}
	go func() {
		if cmd.Stdin != nil {
			_, _ = io.Copy(in, cmd.Stdin)
		}
		_ = in.Close()
	}()

	var drains sync.WaitGroup
	var outErr, errErr error
	if cmd.Stdout != nil {
		drains.Go(func() { outErr = drain(cmd.Stdout, cp.Stdout) })
	}
	if cmd.Stderr != nil {
		drains.Go(func() { errErr = drain(cmd.Stderr, cp.Stderr) })
	}
	code, err := cp.Wait(ctx, nil)
	drains.Wait()
	p.code = code
	switch {
	case err != nil:
		p.err = classify(err)
	case outErr != nil:
		p.err = fmt.Errorf("stdout: %w", classify(outErr))
	case errErr != nil:
		p.err = fmt.Errorf("stderr: %w", classify(errErr))
	}
}

// drain copies r to w. A writer that fails is dropped but r is still read
// to its end, so the process is never left blocked on its output; the
// writer's error is reported after that.
func drain(w io.Writer, r io.Reader) error {
	sw := &sink{w: w}
	if _, err := io.Copy(sw, r); err != nil {
		return err
	}
	return sw.err
}

// sink forwards writes until one fails, then swallows them.
type sink struct {
	w   io.Writer
	err error
}

func (s *sink) Write(b []byte) (int, error) {
	if s.err == nil {
		if _, err := s.w.Write(b); err != nil {
			s.err = fmt.Errorf("writing the output: %w", err)
		}
	}
	return len(b), nil
}

// PID is 0: the SDK does not report a process id.
func (p *process) PID() int { return 0 }

// Wait returns the exit code once the process has ended and its output is
// delivered; DeadlineExceeded when the command's timeout passes first.
func (p *process) Wait(ctx context.Context) (int, error) {
	var expired <-chan time.Time
	if !p.deadline.IsZero() {
		t := time.NewTimer(time.Until(p.deadline))
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-p.done:
		if p.err != nil {
			return p.code, p.err
		}
		if !p.deadline.IsZero() && !time.Now().Before(p.deadline) && killed(p.code) {
			return p.code, p.timeoutErr()
		}
		return p.code, nil
	case <-expired:
		return 0, p.timeoutErr()
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (p *process) timeoutErr() error {
	return errdefs.Errorf(errdefs.DeadlineExceeded, "command ran past its %v timeout and was killed", p.timeout)
}

// killed reports an exit status of a process ended by Modal: a signal
// (128+n), or 124 for a timeout.
func killed(code int) bool { return code == 124 || code > 128 }
