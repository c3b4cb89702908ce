package envd

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/berth-sh/berth/envd/envdproto"
	"github.com/berth-sh/berth/internal/hostproc"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// hostProcess is a process this host started (internal/hostproc), killed
// when the server closes.
type hostProcess struct {
	*hostproc.Process
	stopCtx func() bool // unregisters the kill at the server's Close
}

var _ BackendProcess = (*hostProcess)(nil)

// Start starts the process with its output going to spec's writers.
func (h *host) Start(ctx context.Context, spec StartSpec) (BackendProcess, error) {
	cfg := spec.Config
	c, err := h.resolveCaller(spec.User)
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	var user map[string]string
	if a := c.acct; a != nil {
		user = map[string]string{"HOME": a.home, "USER": a.name, "LOGNAME": a.name}
	}
	env := hostproc.Environ(h.opts.Env, user, cfg.Envs)
	dir := h.home(c)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		dir = "/" // a home that does not exist, like nobody's /nonexistent
	}
	if cfg.Cwd != nil && *cfg.Cwd != "" {
		d, err := h.resolvePath(*cfg.Cwd, c)
		if err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cwd: %w", err))
		}
		dir = d
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		// Not NotFound: clients read NotFound from Start as "no such program".
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cwd %q is not a directory", dir))
	}
	hs := hostproc.Spec{
		Args:        append([]string{cfg.Cmd}, cfg.Args...),
		Env:         env,
		Dir:         dir,
		Stdin:       spec.Stdin,
		Stdout:      spec.Stdout,
		Stderr:      spec.Stderr,
		Timeout:     spec.Timeout,
		Grace:       h.opts.ExitGrace,
		OOMScoreAdj: h.opts.CommandOOMScoreAdj,
	}
	if a := c.acct; needsCredential(a) {
		hs.Credential = &syscall.Credential{Uid: a.uid, Gid: a.gid, Groups: a.groups}
	}
	hs.Path, err = hostproc.LookPath(cfg.Cmd, hostproc.Lookup{PATH: hostproc.Getenv(env, "PATH"), Dir: dir})
	if err != nil {
		return nil, startError(err)
	}
	hp, err := hostproc.Start(ctx, hs)
	if err != nil {
		return nil, startError(err)
	}
	if cfg.Cwd == nil {
		cfg.Cwd = &dir
	}
	p := &hostProcess{Process: hp}
	p.stopCtx = context.AfterFunc(ctx, func() { _ = hp.Signal(syscall.SIGKILL) })
	return p, nil
}

// startError is the Connect error of a program that could not be started:
// clients read NotFound as a shell's 127 and PermissionDenied as its 126.
func startError(err error) error {
	switch code, _ := hostproc.ShellStatus(err); code {
	case 127:
		return connect.NewError(connect.CodeNotFound, err)
	case 126:
		return connect.NewError(connect.CodePermissionDenied, err)
	}
	return err
}

// Wait collects the exit status and lets the output drain.
func (p *hostProcess) Wait() *envdproto.EndEvent {
	ex := p.Process.Wait()
	p.stopCtx()
	return endEvent(ex)
}

// Signal signals the process group, so that children of a shell die too.
func (p *hostProcess) Signal(_ context.Context, sig driver.Signal) error {
	s := syscall.SIGKILL
	if sig == driver.SIGTERM {
		s = syscall.SIGTERM
	}
	err := p.Process.Signal(s)
	if err == syscall.ESRCH {
		return errdefs.Errorf(errdefs.NotFound, "process %d: %w", p.PID(), err)
	}
	return err
}

// WriteStdin writes with a deadline that ctx's end sets, so that a process
// that does not read cannot hold the call forever.
func (p *hostProcess) WriteStdin(ctx context.Context, data []byte) error {
	in := p.Stdin()
	stop := context.AfterFunc(ctx, func() { _ = in.SetWriteDeadline(time.Now()) })
	_, err := in.Write(data)
	if !stop() {
		_ = in.SetWriteDeadline(time.Time{})
		return ctx.Err()
	}
	return err
}

func (p *hostProcess) CloseStdin() { _ = p.Stdin().Close() }

// timeoutError is EndEvent.error for a process killed at its deadline.
const timeoutError = "process timed out"

func endEvent(ex hostproc.Exit) *envdproto.EndEvent {
	end := &envdproto.EndEvent{ExitCode: int32(ex.Code)}
	switch {
	case ex.Err != nil:
		msg := ex.Err.Error()
		end.Status, end.Error = "unknown", &msg
	case ex.Signal != 0:
		end.Status = "signal: " + ex.Signal.String()
	default:
		end.Exited = true
		end.Status = fmt.Sprintf("exit status %d", ex.Code)
	}
	if ex.TimedOut {
		msg := timeoutError
		end.Error = &msg
	}
	return end
}
