package fakeengine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/internal/dirfd"
	"github.com/berth-sh/berth/internal/hostproc"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// ErrWorkDir is what Exec's error wraps when the working directory is
// missing or not a directory (with the errno beside it).
var ErrWorkDir = errors.New("bad working directory")

// Command is a command to run in a sandbox.
type Command struct {
	Args []string
	// Dir is the sandbox path it runs in; "" is the sandbox's WorkDir, or
	// "/".
	Dir string
	// Env is laid over the sandbox's environment.
	Env map[string]string
	// Stdin gives it a pipe (Proc.Stdin); without it, it reads /dev/null.
	Stdin bool
	// Stdout and Stderr receive its output (nil discards).
	Stdout, Stderr io.Writer
	// Timeout, Grace and KillGroupAtExit are hostproc.Spec's.
	Timeout         time.Duration
	Grace           time.Duration
	KillGroupAtExit bool
	// OnExit, when set, runs once the command has ended and its output is
	// delivered, before Proc.Done is closed, on a goroutine of the
	// engine's.
	OnExit func(hostproc.Exit)
}

// Proc is a command started in a sandbox.
type Proc struct {
	sb     *Sandbox
	hp     *hostproc.Process // nil for a program that never started
	done   chan struct{}
	exit   hostproc.Exit
	onExit func(hostproc.Exit)
}

// Exec starts c in the sandbox. ctx bounds only the start. The program is
// found in the command's PATH: inside the tree when it is confined,
// otherwise on the host (an absolute name the tree holds runs from the
// tree), in the working directory mapped into the tree. A program that
// cannot be run is no error: its Proc ends as a shell's would, 127 or 126,
// the shell's complaint written to Stderr. A missing working directory is
// an error wrapping ErrWorkDir.
func (sb *Sandbox) Exec(ctx context.Context, c Command) (*Proc, error) {
	if len(c.Args) == 0 || c.Args[0] == "" {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "command has no program")
	}
	dir := c.Dir
	if dir == "" {
		dir = sb.workDir
	}
	if dir == "" {
		dir = "/"
	}
	host, err := sb.hostDir(dir)
	if err != nil {
		return nil, err
	}
	spec := hostproc.Spec{
		Args: c.Args, Env: hostproc.Environ(nil, sb.env, c.Env), Dir: host, Stdin: c.Stdin,
		Stdout: c.Stdout, Stderr: c.Stderr, Timeout: c.Timeout, Grace: c.Grace, KillGroupAtExit: c.KillGroupAtExit,
	}
	look := hostproc.Lookup{PATH: hostproc.Getenv(spec.Env, "PATH"), Dir: host, Tree: sb.root}
	if sb.busybox != "" {
		spec.Dir, spec.Root, spec.Busybox = path.Clean(dir), sb.root, sb.busybox
		look = hostproc.Lookup{PATH: look.PATH, Dir: spec.Dir, Root: sb.root}
	}
	p := &Proc{sb: sb, done: make(chan struct{}), onExit: c.OnExit}
	spec.Path, err = hostproc.LookPath(c.Args[0], look)
	if err == nil {
		p.hp, err = hostproc.Start(ctx, spec)
	}
	if err != nil {
		code, ok := hostproc.ShellStatus(err)
		if !ok {
			return nil, err
		}
		if c.Stderr != nil {
			_, _ = io.WriteString(c.Stderr, hostproc.Complaint(c.Args[0], err))
		}
		p.exit = hostproc.Exit{Code: code}
	}
	p.follow()
	return p, nil
}

// hostDir checks that the sandbox lives and that dir is a directory in its
// tree, and returns it as a host path: where it really is, whatever
// symlinks the tree has on the way, so a host process never follows one
// out of the tree.
func (sb *Sandbox) hostDir(dir string) (host string, err error) {
	err = sb.in(dir, func(r *dirfd.Root, dir string) error {
		f, err := r.Open(dir, unix.O_PATH|unix.O_DIRECTORY)
		if err != nil {
			return fmt.Errorf("%w %s: %w", ErrWorkDir, dir, err)
		}
		defer f.Close()
		host, err = os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
		return err
	})
	return host, err
}

// follow registers the command, so that ending the sandbox kills it (one
// that ended meanwhile kills it at once), and follows it to its end.
func (p *Proc) follow() {
	sb := p.sb
	sb.mu.Lock()
	ended := sb.ended != Running
	sb.procs[p] = struct{}{}
	sb.e.wg.Add(1) // under sb.mu: before Close's End of sb, or seeing it
	sb.mu.Unlock()
	if ended {
		_ = p.SignalGroup(syscall.SIGKILL)
	}
	go func() {
		defer sb.e.wg.Done()
		if p.hp != nil {
			p.exit = p.hp.Wait()
		}
		p.finish()
	}()
}

func (p *Proc) finish() {
	if p.onExit != nil {
		p.onExit(p.exit)
	}
	p.sb.mu.Lock()
	delete(p.sb.procs, p)
	p.sb.mu.Unlock()
	close(p.done)
}

// PID is the process's id, 0 for a program that never started.
func (p *Proc) PID() int {
	if p.hp == nil {
		return 0
	}
	return p.hp.PID()
}

// Stdin is the write end of its stdin (Command.Stdin); nil for a program
// that never started.
func (p *Proc) Stdin() *os.File {
	if p.hp == nil {
		return nil
	}
	return p.hp.Stdin()
}

// Done is closed once the command has ended and its output is delivered.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exit is how it ended; valid once Done is closed.
func (p *Proc) Exit() hostproc.Exit {
	<-p.done
	return p.exit
}

// Signal sends sig to the command's process group; syscall.ESRCH once it
// has exited.
func (p *Proc) Signal(sig syscall.Signal) error {
	if p.hp == nil {
		return syscall.ESRCH
	}
	return p.hp.Signal(sig)
}

// SignalGroup is Signal that still reaches what the command left running
// in its group after it exited.
func (p *Proc) SignalGroup(sig syscall.Signal) error {
	if p.hp == nil {
		return syscall.ESRCH
	}
	return p.hp.SignalGroup(sig)
}
