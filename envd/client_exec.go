package envd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/berth-sh/berth/envd/envdproto"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Process is a command started by Client.Exec or found by Client.Attach.
type Process struct {
	c    *Client
	pid  int
	done chan struct{}
	once sync.Once
	code int
	err  error
}

// finish records the result once and releases Wait.
func (p *Process) finish(code int, err error) {
	p.once.Do(func() {
		p.code, p.err = code, err
		close(p.done)
	})
}

var _ driver.Process = (*Process)(nil)

// PID is the process's id inside the sandbox (0 for a program that could
// not be started, which has already exited 126 or 127).
func (p *Process) PID() int { return p.pid }

// Wait returns the exit code once the process has ended and its output has
// been written (128+n when killed by signal n). A command killed at its
// Timeout returns a DeadlineExceeded error; a lost connection, Unavailable.
// When ctx ends first, Wait returns ctx's error and the process runs on.
func (p *Process) Wait(ctx context.Context) (int, error) {
	select {
	case <-p.done:
		return p.code, p.err
	case <-ctx.Done():
		return -1, ctx.Err()
	}
}

// Done is closed when Wait would return without blocking.
func (p *Process) Done() <-chan struct{} { return p.done }

// Signal sends SIGTERM or SIGKILL to the process's group. A process that has
// ended is NotFound.
func (p *Process) Signal(ctx context.Context, sig driver.Signal) error {
	select {
	case <-p.done:
		return errdefs.Errorf(errdefs.NotFound, "envd signal: process %d has ended", p.pid)
	default:
	}
	if p.pid == 0 {
		return errdefs.Errorf(errdefs.NotFound, "envd signal: the process never started")
	}
	return p.c.Signal(ctx, p.pid, sig)
}

// Signal sends sig to the process pid (and its group).
func (c *Client) Signal(ctx context.Context, pid int, sig driver.Signal) error {
	var s envdproto.Signal
	switch sig {
	case driver.SIGTERM:
		s = envdproto.SignalSIGTERM
	case driver.SIGKILL:
		s = envdproto.SignalSIGKILL
	default:
		return errdefs.Errorf(errdefs.NotSupported, "envd signal: %q is not one of SIGTERM, SIGKILL", sig)
	}
	_, err := c.sendSignal.CallUnary(ctx, request(c, &envdproto.SendSignalRequest{Process: envdproto.SelectPID(pid), Signal: s}, ""))
	return classify("signal", err)
}

// Processes lists the processes running in the sandbox.
func (c *Client) Processes(ctx context.Context) ([]envdproto.ProcessInfo, error) {
	res, err := c.list.CallUnary(ctx, request(c, &envdproto.ListRequest{}, ""))
	if err != nil {
		return nil, classify("list processes", err)
	}
	return res.Msg.Processes, nil
}

// eventStream is a Start or a Connect stream, seen as process events.
type eventStream interface {
	Receive() bool
	Event() *envdproto.ProcessEvent
	Err() error
	Close() error
}

type startStream struct {
	*connect.ServerStreamForClient[envdproto.StartResponse]
}

func (s startStream) Event() *envdproto.ProcessEvent { return s.Msg().Event }

type connectStream struct {
	*connect.ServerStreamForClient[envdproto.ConnectResponse]
}

func (s connectStream) Event() *envdproto.ProcessEvent { return s.Msg().Event }

var errIdle = errors.New("no event or keepalive from the server")

// streamCtx is the context a process stream lives under: the client's, not
// the caller's, since the process outlives the call that started it.
func (c *Client) streamCtx(timeout time.Duration) (context.Context, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(c.ctx)
	if timeout <= 0 {
		return ctx, cancel
	}
	tctx, tcancel := context.WithTimeout(ctx, timeout)
	return tctx, func(err error) { cancel(err); tcancel() }
}

func (c *Client) setKeepalive(h interface{ Set(string, string) }) {
	if c.opts.keepalive > 0 {
		// Whole seconds when possible: upstream servers may parse an integer.
		v := strconv.FormatFloat(c.opts.keepalive.Seconds(), 'f', -1, 64)
		h.Set(keepaliveHeader, v)
	}
}

// Exec starts cmd and returns once the server reports its pid. Output goes
// to cmd.Stdout and cmd.Stderr from one goroutine as it arrives; cmd.Stdin is
// sent with SendInput and closed at EOF. A program that is not found
// (or not executable) is not an error: its Process has exited 127 (126) with
// the reason on cmd.Stderr.
func (c *Client) Exec(ctx context.Context, cmd driver.Command) (*Process, error) {
	if len(cmd.Args) == 0 || cmd.Args[0] == "" {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "envd exec: empty command")
	}
	if cmd.Timeout < 0 {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "envd exec: timeout %v is negative", cmd.Timeout)
	}
	if err := c.ctx.Err(); err != nil {
		return nil, errdefs.Errorf(errdefs.Unavailable, "envd exec: client is closed")
	}
	withStdin := cmd.Stdin != nil
	cfg := &envdproto.ProcessConfig{Cmd: cmd.Args[0], Args: cmd.Args[1:], Envs: cmd.Env}
	if cmd.Dir != "" {
		dir := cmd.Dir
		cfg.Cwd = &dir
	}
	req := request(c, &envdproto.StartRequest{Process: cfg, Stdin: &withStdin}, cmd.User)
	c.setKeepalive(req.Header())

	sctx, cancel := c.streamCtx(cmd.Timeout)
	stream, err := c.openStream(ctx, sctx, cancel, func() (eventStream, error) {
		s, err := c.start.CallServerStream(sctx, req)
		return startStream{s}, err
	})
	if err != nil {
		var ce *connect.Error
		if errors.As(err, &ce) && ctx.Err() == nil {
			switch ce.Code() {
			case connect.CodeNotFound:
				return exited(c, 127, ce.Message(), cmd.Stderr), nil
			case connect.CodePermissionDenied:
				return exited(c, 126, ce.Message(), cmd.Stderr), nil
			}
		}
		return nil, classify("exec", err)
	}
	p := c.follow(stream, sctx, cancel, cmd.Stdout, cmd.Stderr, cmd.Timeout)
	if withStdin {
		go p.pumpStdin(sctx, cmd.Stdin)
	}
	return p, nil
}

// Attach follows a running process's output from now on, as Connect does.
func (c *Client) Attach(ctx context.Context, pid int, stdout, stderr io.Writer) (*Process, error) {
	req := request(c, &envdproto.ConnectRequest{Process: envdproto.SelectPID(pid)}, "")
	c.setKeepalive(req.Header())
	sctx, cancel := c.streamCtx(0)
	stream, err := c.openStream(ctx, sctx, cancel, func() (eventStream, error) {
		s, err := c.connect.CallServerStream(sctx, req)
		return connectStream{s}, err
	})
	if err != nil {
		return nil, classify("attach", err)
	}
	return c.follow(stream, sctx, cancel, stdout, stderr, 0), nil
}

// openStream opens a process stream under sctx and reads its first event,
// which must be start; ctx bounds only this opening.
func (c *Client) openStream(ctx, sctx context.Context, cancel context.CancelCauseFunc, open func() (eventStream, error)) (eventStream, error) {
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	fail := func(err error) (eventStream, error) {
		stop()
		cancel(nil)
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, err
	}
	stream, err := open()
	if err != nil {
		return fail(err)
	}
	if !stream.Receive() {
		err := stream.Err()
		_ = stream.Close()
		if err == nil {
			err = connect.NewError(connect.CodeUnavailable, errors.New("stream ended before the start event"))
		}
		return fail(err)
	}
	if ev := stream.Event(); ev == nil || ev.Start == nil {
		_ = stream.Close()
		return fail(connect.NewError(connect.CodeUnavailable, errors.New("first event of the stream is not start")))
	}
	if !stop() {
		_ = stream.Close()
		return fail(context.Cause(ctx))
	}
	return stream, nil
}

// follow reads the rest of a stream in one goroutine.
func (c *Client) follow(stream eventStream, sctx context.Context, cancel context.CancelCauseFunc, stdout, stderr io.Writer, timeout time.Duration) *Process {
	p := &Process{c: c, pid: int(stream.Event().Start.PID), done: make(chan struct{})}
	c.streams.Add(1)
	go func() {
		defer c.streams.Done()
		defer cancel(nil)
		p.finish(p.read(stream, sctx, cancel, stdout, stderr, timeout))
	}()
	return p
}

func (p *Process) read(stream eventStream, sctx context.Context, cancel context.CancelCauseFunc, stdout, stderr io.Writer, timeout time.Duration) (int, error) {
	var idle *time.Timer
	if ka := p.c.opts.keepalive; ka > 0 {
		idle = time.AfterFunc(3*ka, func() { cancel(errIdle) })
		defer idle.Stop()
	}
	var end *envdproto.EndEvent
	for stream.Receive() {
		if idle != nil {
			idle.Reset(3 * p.c.opts.keepalive)
		}
		ev := stream.Event()
		switch {
		case ev == nil:
		case ev.Data != nil:
			if len(ev.Data.Stdout) > 0 && stdout != nil {
				if _, err := stdout.Write(ev.Data.Stdout); err != nil {
					stdout = nil // keep draining; a failed writer loses only its own output
				}
			}
			if len(ev.Data.Stderr) > 0 && stderr != nil {
				if _, err := stderr.Write(ev.Data.Stderr); err != nil {
					stderr = nil
				}
			}
		case ev.End != nil && end == nil:
			// Everything has been delivered: release Wait now and read the
			// trailer after, so the connection can be reused.
			end = ev.End
			code := exitCodeOf(end)
			timedOut := timeout > 0 && errors.Is(context.Cause(sctx), context.DeadlineExceeded)
			if (end.Error != nil && *end.Error == timeoutError) || (timedOut && !end.Exited) {
				p.finish(code, errdefs.Errorf(errdefs.DeadlineExceeded, "envd exec: command timed out after %v", timeout))
			} else {
				p.finish(code, nil)
			}
		}
	}
	err := stream.Err()
	_ = stream.Close()
	cause := context.Cause(sctx)
	timedOut := timeout > 0 && errors.Is(cause, context.DeadlineExceeded)
	switch {
	case end != nil:
		return 0, nil // finished above; finish ignores this
	case timedOut:
		// The server kills at the same deadline; make sure of it.
		kctx, kcancel := context.WithTimeout(context.WithoutCancel(p.c.ctx), time.Second)
		_ = p.c.Signal(kctx, p.pid, driver.SIGKILL)
		kcancel()
		return -1, errdefs.Errorf(errdefs.DeadlineExceeded, "envd exec: command timed out after %v", timeout)
	case errors.Is(cause, errIdle):
		return -1, errdefs.Errorf(errdefs.Unavailable, "envd exec: process %d: %w", p.pid, errIdle)
	case p.c.ctx.Err() != nil:
		return -1, errdefs.Errorf(errdefs.Unavailable, "envd exec: process %d: client closed", p.pid)
	case err != nil:
		err = classify("exec stream", err)
		if errdefs.ClassOf(err) == errdefs.Unknown {
			// The server answers with codes; anything else is a broken stream.
			err = errdefs.Classify(errdefs.Unavailable, err)
		}
		return -1, err
	}
	return -1, errdefs.Errorf(errdefs.Unavailable, "envd exec: process %d exited without a result", p.pid)
}

// pumpStdin copies r to the process with SendInput and closes stdin at EOF
// or at the first failure (a process gone, a refused chunk), so that the
// process never waits for input that will not come.
func (p *Process) pumpStdin(ctx context.Context, r io.Reader) {
	buf := make([]byte, 64<<10)
	sel := envdproto.SelectPID(p.pid)
	defer func() {
		_, _ = p.c.closeStdin.CallUnary(ctx, request(p.c, &envdproto.CloseStdinRequest{Process: sel}, ""))
	}()
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			req := request(p.c, &envdproto.SendInputRequest{Process: sel, Input: &envdproto.ProcessInput{Stdin: buf[:n]}}, "")
			if _, err := p.c.sendInput.CallUnary(ctx, req); err != nil {
				return
			}
		}
		if rerr != nil {
			return
		}
	}
}

// exited is the Process of a program that could not be started.
func exited(c *Client, code int, msg string, stderr io.Writer) *Process {
	if stderr != nil {
		_, _ = fmt.Fprintf(stderr, "berth: %s\n", msg)
	}
	p := &Process{c: c, done: make(chan struct{})}
	p.finish(code, nil)
	return p
}

var signalNumbers = func() map[string]int {
	m := map[string]int{}
	for i := 1; i < 32; i++ {
		m[syscall.Signal(i).String()] = i
	}
	return m
}()

// exitCodeOf reads an end event; a process killed by a signal counts as
// 128+n whether the server said so (berth) or sent -1 with a status text
// such as "signal: killed" (upstream envd).
func exitCodeOf(end *envdproto.EndEvent) int {
	if end.Exited || end.ExitCode > 0 {
		return int(end.ExitCode)
	}
	if name, ok := strings.CutPrefix(end.Status, "signal: "); ok {
		if n, ok := signalNumbers[name]; ok {
			return 128 + n
		}
	}
	return int(end.ExitCode)
}
