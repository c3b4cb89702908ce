package fakeprovider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/berth-sh/berth/internal/hostproc"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// process is one started command. done closes once it has exited, every
// process of its group is gone and its output has been delivered.
type process struct {
	hp       *hostproc.Process // nil for a program that never started
	done     chan struct{}
	dropped  chan struct{} // closed when DropStream cut stdout
	dropOnce sync.Once
	faults   *Injector

	code int
	err  error
}

var _ driver.Process = (*process)(nil)

func (s *sandbox) Exec(ctx context.Context, c driver.Command) (driver.Process, error) {
	faults := s.p.opts.Faults.Get()
	if faults.HangExec {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if len(c.Args) == 0 || c.Args[0] == "" {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "command has no program")
	}
	root, m, err := s.openRoot()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	tree := filepath.Join(s.dir, "root")
	cwd, err := workDir(root, tree, firstSet(c.Dir, m.WorkDir, "/"))
	if err != nil {
		return nil, err
	}
	p := &process{done: make(chan struct{}), dropped: make(chan struct{}), faults: s.p.opts.Faults}
	spec := hostproc.Spec{
		Args: c.Args, Env: hostproc.Environ(nil, m.Env, c.Env), Dir: cwd, Stdin: c.Stdin != nil,
		Stdout: c.Stdout, Stderr: c.Stderr, Timeout: c.Timeout, KillGroupAtExit: true,
	}
	look := hostproc.Lookup{PATH: hostproc.Getenv(spec.Env, "PATH"), Dir: cwd, Tree: tree}
	if s.p.opts.Busybox != "" {
		// Inside the root the working directory is the sandbox path.
		rel, _ := filepath.Rel(tree, cwd)
		spec.Dir = "/" + filepath.ToSlash(rel)
		spec.Root, spec.Busybox = tree, s.p.opts.Busybox
		look = hostproc.Lookup{PATH: look.PATH, Dir: spec.Dir, Root: tree}
	}
	if faults.DropStream {
		spec.Stdout = &dropWriter{w: c.Stdout, p: p}
	}
	spec.Path, err = hostproc.LookPath(c.Args[0], look)
	if err == nil {
		p.hp, err = hostproc.Start(ctx, spec)
	}
	if err != nil {
		return p.refused(c, err, faults.DropStream)
	}
	p.run(s.dir, c, faults.DropStream)
	return p, nil
}

// refused ends a command whose program could not be run as a shell does
// (exit 127 or 126 with its complaint on stderr); any other failure is
// Exec's error.
func (p *process) refused(c driver.Command, err error, drop bool) (driver.Process, error) {
	code, ok := hostproc.ShellStatus(err)
	if !ok {
		if errdefs.ClassOf(err) == errdefs.Unknown {
			err = errdefs.Classify(errdefs.InvalidArgument, err)
		}
		return nil, err
	}
	if c.Stderr != nil {
		_, _ = io.WriteString(c.Stderr, hostproc.Complaint(c.Args[0], err))
	}
	p.code = code
	close(p.done)
	if drop {
		p.drop()
	}
	return p, nil
}

// run follows a started command until it is over.
func (p *process) run(dir string, c driver.Command, drop bool) {
	register(dir, p)
	if _, err := os.Stat(dir); err != nil {
		// Deleted between our check and register: its killAll missed us.
		p.killGroup(syscall.SIGKILL)
	}
	if c.Stdin != nil {
		// Not waited for: a caller's Stdin that never reaches EOF must not
		// keep Wait from returning; Wait closes the pipe, which ends the
		// copy at its next write.
		go func() {
			_, _ = io.Copy(p.hp.Stdin(), c.Stdin)
			_ = p.hp.Stdin().Close()
		}()
	}
	go func() {
		ex := p.hp.Wait()
		p.code = ex.Code
		if ex.TimedOut {
			p.code = -1
			p.err = errdefs.Errorf(errdefs.DeadlineExceeded, "command timed out after %v", c.Timeout)
		}
		if drop {
			p.drop()
		}
		unregister(dir, p)
		close(p.done)
	}()
}

func firstSet(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// workDir maps the sandbox working directory to a host directory, checking
// through os.Root that it exists and that no symlink leads it outside.
func workDir(root *os.Root, rootPath, dir string) (string, error) {
	name, err := rel(dir)
	if err != nil {
		return "", err
	}
	fi, err := root.Stat(name)
	if err != nil {
		return "", fmt.Errorf("working directory %s: %w", dir, mapErr(err))
	}
	if !fi.IsDir() {
		return "", errdefs.Errorf(errdefs.InvalidArgument, "working directory %s is not a directory", dir)
	}
	return filepath.Join(rootPath, filepath.FromSlash(name)), nil
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

func (p *process) killGroup(sig syscall.Signal) {
	if p.hp != nil {
		_ = p.hp.Signal(sig)
	}
}

func (p *process) PID() int {
	if p.hp == nil {
		return 0
	}
	return p.hp.PID()
}

func (p *process) Wait(ctx context.Context) (int, error) {
	if p.faults.Get().HangExec {
		<-ctx.Done()
		return -1, ctx.Err()
	}
	select {
	case <-p.dropped:
		return -1, errdefs.Errorf(errdefs.Unavailable, "output stream of process %d dropped", p.PID())
	default:
	}
	select {
	case <-p.done:
		select {
		case <-p.dropped:
			return -1, errdefs.Errorf(errdefs.Unavailable, "output stream of process %d dropped", p.PID())
		default:
		}
		return p.code, p.err
	case <-p.dropped:
		return -1, errdefs.Errorf(errdefs.Unavailable, "output stream of process %d dropped", p.PID())
	case <-ctx.Done():
		return -1, ctx.Err()
	}
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
	case <-p.done:
		return errdefs.Errorf(errdefs.NotFound, "process %d has ended", p.PID())
	default:
	}
	if err := p.hp.Signal(s); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return errdefs.Errorf(errdefs.NotFound, "process %d has ended", p.PID())
		}
		return errdefs.Classify(errdefs.Unavailable, err)
	}
	return nil
}
