package shellsession

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/retry"
)

// bootShell starts bash when the image has it, else sh, with stderr merged
// into stdout so that output keeps its order.
const bootShell = `if command -v bash >/dev/null 2>&1; then exec bash --noprofile --norc -s 2>&1; fi; exec sh -s 2>&1`

// interruptChildren sends SIGINT to the children of the shell $P (reading
// /proc: the field after the command name's ")" is the state, then ppid).
const interruptChildren = `for d in /proc/[0-9]*; do s=$(cat "$d/stat" 2>/dev/null) || continue; set -- ${s##*) }; [ "$2" = "$P" ] && kill -INT "${d#/proc/}" 2>/dev/null; done; exit 0`

// startTimeout bounds a shell's start (its first marker).
const startTimeout = 60 * time.Second

type pipe struct {
	sb    *sandbox.Sandbox
	o     Options
	nonce string
	life  context.Context // the shell lives as long as Open's ctx

	stdin *io.PipeWriter
	proc  *sandbox.Process
	done  chan struct{} // closed when the shell has exited
	code  int
	err   error
	out   *capture
	pid   int
	sent  int
	notes []string
}

func openPipe(ctx context.Context, sb *sandbox.Sandbox, o Options) (*pipe, error) {
	p := &pipe{sb: sb, o: o, nonce: nonce(), life: ctx}
	if err := p.start(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *pipe) Kind() string { return "pipe" }

func (p *pipe) start(ctx context.Context) error {
	pr, pw := io.Pipe()
	p.out = newCapture(p.nonce, 2*p.o.MaxOutput)
	proc, err := p.sb.Exec(p.life, sandbox.Command{Args: []string{"sh", "-c", bootShell}, Stdin: pr, Stdout: p.out, Stderr: p.out, Dir: p.o.Dir, Env: p.o.Env})
	if err != nil {
		pw.Close()
		return err
	}
	p.proc, p.stdin, p.sent = proc, pw, 0
	p.done = make(chan struct{})
	go func(done chan struct{}) {
		p.code, p.err = proc.Wait(context.WithoutCancel(p.life))
		pr.CloseWithError(io.ErrClosedPipe)
		close(done)
	}(p.done)
	// Marker 0 carries the shell's pid, for interrupts.
	if err := p.write(ctx, p.markerLine(0, "$$")); err != nil {
		return err
	}
	if idle, err := p.waitIdle(ctx, startTimeout); err != nil || !idle {
		select {
		case <-p.done:
			err = fmt.Errorf("starting the shell: %w", p.exitError())
		default:
			if err == nil {
				err = sandbox.Errorf(sandbox.Unavailable, "the shell did not start within %v", startTimeout)
			}
		}
		p.kill()
		return err
	}
	_, p.pid, _ = p.out.state()
	p.out.take() // a shell's start prints nothing worth showing
	return nil
}

// markerLine prints the marker of seq with value (a shell word: $? or $$).
func (p *pipe) markerLine(seq int, value string) string {
	return fmt.Sprintf("printf '\\036B%s %d %%d\\036\\n' \"%s\"\n", p.nonce, seq, value)
}

// write feeds the shell's stdin, giving up when ctx ends or the shell exits.
func (p *pipe) write(ctx context.Context, s string) error {
	errc := make(chan error, 1)
	go func() {
		_, err := io.WriteString(p.stdin, s)
		errc <- err
	}()
	select {
	case err := <-errc:
		if err != nil {
			return p.exitError()
		}
		return nil
	case <-p.done:
		return p.exitError()
	case <-ctx.Done():
		p.stdin.CloseWithError(ctx.Err())
		return ctx.Err()
	}
}

// quiet drops a write error that only says the shell exited by itself
// (exit typed): Output tells, and the next Send starts a new shell.
func (p *pipe) quiet(err error) error {
	select {
	case <-p.done:
		if p.err == nil {
			return nil
		}
	default:
	}
	return err
}

func (p *pipe) exitError() error {
	select {
	case <-p.done:
		if p.err != nil {
			return fmt.Errorf("the shell ended: %w", p.err)
		}
		return fmt.Errorf("the shell exited with code %d", p.code)
	default:
		return errors.New("the shell's stdin is closed")
	}
}

// ensure starts a new shell when the last one exited (exit typed), noting
// it for the next Output. An exit that came with an error (the sandbox is
// gone) is returned instead.
func (p *pipe) ensure(ctx context.Context) error {
	select {
	case <-p.done:
	default:
		return nil
	}
	if p.err != nil {
		return fmt.Errorf("the shell ended: %w", p.err)
	}
	rest := p.out.take()
	if err := p.start(ctx); err != nil {
		return err
	}
	p.notes = append(p.notes, rest+fmt.Sprintf("[the shell exited with code %d; a new shell was started]\n", p.code))
	return nil
}

// succeeds runs a quiet command in the shell and reports whether it
// exited 0.
func (p *pipe) succeeds(ctx context.Context, cmd string) (bool, error) {
	p.sent++
	if err := p.write(ctx, cmd+"\n"+p.markerLine(p.sent, "$?")); err != nil {
		return false, err
	}
	idle, err := p.waitIdle(ctx, startTimeout)
	if err != nil {
		return false, err
	}
	if !idle {
		return false, sandbox.Errorf(sandbox.Unavailable, "the shell did not answer within %v", startTimeout)
	}
	_, v, _ := p.out.state()
	p.out.take()
	return v == 0, nil
}

func (p *pipe) Send(ctx context.Context, keys string, wait time.Duration) (bool, error) {
	if err := p.ensure(ctx); err != nil {
		return false, err
	}
	line := strings.HasSuffix(keys, "\n")
	switch {
	case keys == "C-c":
		if _, err := p.sb.Run(ctx, sandbox.Command{Args: []string{"sh", "-c", interruptChildren}, Env: map[string]string{"P": strconv.Itoa(p.pid)}}); err != nil {
			return false, err
		}
	case IsKey(keys):
		b, ok := map[string]string{"Enter": "\n", "Tab": "\t", "Escape": "\x1b"}[keys]
		if !ok {
			return false, fmt.Errorf("%w: %s needs a terminal, and this shell has none (no tmux in the sandbox)", ErrKey, keys)
		}
		if err := p.write(ctx, b); err != nil {
			return false, p.quiet(err)
		}
		line = keys == "Enter"
	default:
		if err := p.write(ctx, keys); err != nil {
			return false, p.quiet(err)
		}
	}
	if line {
		p.sent++
		if err := p.write(ctx, p.markerLine(p.sent, "$?")); err != nil {
			return false, p.quiet(err)
		}
	}
	if seen, _, _ := p.out.state(); seen >= p.sent {
		// Nothing runs: the keys went to the shell's line, give output a moment.
		return true, retry.Sleep(ctx, min(wait, 50*time.Millisecond))
	}
	return p.waitIdle(ctx, wait)
}

// waitIdle waits until the last marker sent has come back.
func (p *pipe) waitIdle(ctx context.Context, wait time.Duration) (bool, error) {
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		seen, _, changed := p.out.state()
		if seen >= p.sent {
			return true, nil
		}
		select {
		case <-changed:
		case <-t.C:
			return false, nil
		case <-p.done:
			// Output after the exit is already delivered (Wait returns
			// after it); the shell is idle in the sense that nothing runs.
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

func (p *pipe) Output(context.Context) (string, error) {
	text := strings.Join(p.notes, "") + p.out.take()
	p.notes = nil
	select {
	case <-p.done:
		if p.err == nil {
			text += fmt.Sprintf("[the shell exited with code %d; a new one starts with the next command]\n", p.code)
		}
	default:
	}
	return Clip(text, p.o.MaxOutput), nil
}

func (p *pipe) kill() {
	p.stdin.Close()
	select {
	case <-p.done:
		return
	case <-time.After(2 * time.Second):
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(p.life), 10*time.Second)
	defer cancel()
	_ = p.proc.Signal(ctx, sandbox.SIGKILL)
	select {
	case <-p.done:
	case <-ctx.Done():
	}
}

func (p *pipe) Close(context.Context) error {
	if p.proc != nil {
		p.kill()
	}
	return nil
}
