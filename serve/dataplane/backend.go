package dataplane

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/envd/envdproto"
	"github.com/berth-sh/berth/sandbox"
)

// backend is envd.Backend over one sandbox's API. Every caller acts as
// the sandbox's own user for files (the API has no other); processes run
// as the user the call names, as Command.User.
type backend struct {
	sb   *sandbox.Sandbox
	home string

	homeOnce sync.Once
	homeOK   bool
}

var _ envd.Backend = (*backend)(nil)

// Path resolves raw against the home; user does not change it.
func (b *backend) Path(_, raw string) (string, error) { return ResolvePath(raw, b.home) }

// homeDir reports whether the home exists in the sandbox (checked once).
func (b *backend) homeDir(ctx context.Context) (string, bool) {
	b.homeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		fi, err := b.sb.Stat(ctx, b.home)
		b.homeOK = err == nil && fi.Type == sandbox.FileDir
	})
	return b.home, b.homeOK
}

// Start runs the command through Exec. ctx, the server's lifetime, is
// Exec's and Wait's: a client that goes away does not end the process.
func (b *backend) Start(ctx context.Context, spec envd.StartSpec) (envd.BackendProcess, error) {
	cfg := spec.Config
	cmd := sandbox.Command{
		Args:    append([]string{cfg.Cmd}, cfg.Args...),
		Env:     cfg.Envs,
		User:    spec.User,
		Timeout: spec.Timeout,
		Stdout:  spec.Stdout,
		Stderr:  spec.Stderr,
	}
	if cfg.Cwd != nil && *cfg.Cwd != "" {
		dir, err := b.Path(spec.User, *cfg.Cwd)
		if err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, err)
		}
		cmd.Dir = dir
	} else if home, ok := b.homeDir(ctx); ok {
		cmd.Dir = home
	}
	if cmd.Dir != "" {
		cfg.Cwd = &cmd.Dir
	}
	p := &process{life: ctx}
	if spec.Stdin {
		pr, pw := io.Pipe()
		cmd.Stdin, p.stdin, p.sem = pr, pw, make(chan struct{}, 1)
	}
	h, err := b.sb.Exec(ctx, cmd)
	if err != nil {
		if p.stdin != nil {
			_ = p.stdin.Close()
		}
		if sandbox.ClassOf(err) == sandbox.NotFound {
			// Clients read NotFound from Start as "no such program"; here it
			// is the working directory.
			return nil, connect.NewError(connect.CodeInvalidArgument, err)
		}
		return nil, err
	}
	p.h = h
	return p, nil
}

// process is a sandbox.Process with stdin through a pipe.
type process struct {
	h     *sandbox.Process
	life  context.Context
	stdin *io.PipeWriter // nil when not requested
	sem   chan struct{}  // held until a write is taken, even one given up on
}

func (p *process) PID() int { return p.h.PID() }

func (p *process) Signal(ctx context.Context, sig sandbox.Signal) error { return p.h.Signal(ctx, sig) }

// Wait turns Wait's outcome into an end event.
func (p *process) Wait() *envdproto.EndEvent {
	code, err := p.h.Wait(p.life)
	end := &envdproto.EndEvent{ExitCode: int32(code), Exited: true, Status: fmt.Sprintf("exit status %d", code)}
	fail := func(status, msg string) {
		end.Exited, end.Status, end.Error = false, status, &msg
	}
	switch {
	case err == nil:
	case sandbox.ClassOf(err) == sandbox.DeadlineExceeded:
		fail("killed", "process timed out")
	case p.life.Err() != nil:
		end.ExitCode = -1
		fail("unknown", "the sandbox was deleted")
	default:
		end.ExitCode = -1
		fail("unknown", err.Error())
	}
	return end
}

// WriteStdin delivers data unless ctx ends first; a write given up on
// stays pending (holding the next one back) until the process reads it or
// stdin closes.
func (p *process) WriteStdin(ctx context.Context, data []byte) error {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	res := make(chan error, 1)
	go func() {
		_, err := p.stdin.Write(data)
		<-p.sem
		res <- err
	}()
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *process) CloseStdin() { _ = p.stdin.Close() }
