package hostproc

import (
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Process is a started process, the leader of a process group of its own.
type Process struct {
	proc  *os.Process
	pid   int
	stdin *os.File // nil without Spec.Stdin
	outs  [2]*os.File
	pumps sync.WaitGroup
	grace time.Duration
	timer *time.Timer // the timeout; nil without one

	killGroupAtExit bool

	// mu orders signals against the exit: once exited is set (the leader
	// has exited but is not reaped, so its pid is still its own) no signal
	// goes to the pid.
	mu       sync.RWMutex
	exited   atomic.Bool
	timedOut atomic.Bool

	waitOnce sync.Once
	exit     Exit
}

// Exit is how a process ended.
type Exit struct {
	// Code is the exit status, 128+n when signal n killed it (as a shell
	// reports it), -1 when the wait failed.
	Code int
	// Signal is the signal that killed it, 0 when it exited.
	Signal syscall.Signal
	// TimedOut: Spec.Timeout killed it.
	TimedOut bool
	// Err is why the wait failed; nil otherwise.
	Err error
}

func newProcess(proc *os.Process, s Spec, e *ends) *Process {
	p := &Process{
		proc: proc, pid: proc.Pid, stdin: e.stdin, outs: [2]*os.File{e.stdout, e.stderr},
		grace: s.Grace, killGroupAtExit: s.KillGroupAtExit,
	}
	if p.grace <= 0 {
		p.grace = DefaultGrace
	}
	if s.Timeout > 0 {
		p.timer = time.AfterFunc(s.Timeout, func() {
			p.mu.RLock()
			defer p.mu.RUnlock()
			if !p.exited.Load() {
				p.timedOut.Store(true)
				p.kill(syscall.SIGKILL)
			}
		})
	}
	p.pumps.Add(2)
	go p.pump(e.stdout, s.Stdout)
	go p.pump(e.stderr, s.Stderr)
	return p
}

// PID is the process's id, which is also its group's.
func (p *Process) PID() int { return p.pid }

// Stdin is the write end of its stdin (Spec.Stdin), closed by Wait; nil
// without Spec.Stdin.
func (p *Process) Stdin() *os.File { return p.stdin }

// readBufs holds the pumps' buffers: two per process would otherwise be
// most of an exec's garbage.
var readBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// pump copies one output pipe to w (nil discards). Once the process has
// exited, each read gets Grace: a leftover child that holds the pipe open
// but stays quiet does not keep Wait back, while one still writing (or a
// slow w behind a full pipe) loses nothing.
func (p *Process) pump(f *os.File, w io.Writer) {
	defer p.pumps.Done()
	defer f.Close()
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	buf := *bp
	for {
		if p.exited.Load() {
			_ = f.SetReadDeadline(time.Now().Add(p.grace))
		}
		n, err := f.Read(buf)
		if n > 0 && w != nil {
			if _, werr := w.Write(buf[:n]); werr != nil {
				w = nil // drain, so the process never blocks on a full pipe
			}
		}
		if err != nil {
			return
		}
	}
}

// Wait blocks until the process has exited and its output has been
// delivered, and says how it ended. It may be called more than once.
func (p *Process) Wait() Exit {
	p.waitOnce.Do(p.wait)
	return p.exit
}

func (p *Process) wait() {
	awaitExit(p.pid)
	p.mu.Lock()
	if p.killGroupAtExit {
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	}
	p.exited.Store(true)
	p.mu.Unlock()
	if p.timer != nil {
		p.timer.Stop()
	}
	st, err := p.proc.Wait()
	deadline := time.Now().Add(p.grace)
	for _, f := range p.outs {
		_ = f.SetReadDeadline(deadline) // wakes a read begun before the exit
	}
	p.pumps.Wait()
	if p.stdin != nil {
		_ = p.stdin.Close()
	}
	p.exit = Exit{Code: -1, TimedOut: p.timedOut.Load(), Err: err}
	if err != nil {
		return
	}
	switch ws := st.Sys().(syscall.WaitStatus); {
	case ws.Signaled():
		p.exit.Signal = ws.Signal()
		p.exit.Code = 128 + int(ws.Signal())
	case ws.Exited():
		p.exit.Code = ws.ExitStatus()
	}
}

// Signal sends sig to the process group, so that what a shell started
// gets it too, or to the process alone when it has left the group
// (setsid). Once the process has exited it is syscall.ESRCH: its pid may
// be reused.
func (p *Process) Signal(sig syscall.Signal) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.exited.Load() {
		return syscall.ESRCH
	}
	return p.kill(sig)
}

// SignalGroup is Signal that still reaches the group once the process
// has exited, for what it left running there. The group's id stays
// reserved while any member lives, so a signal after the group emptied
// reaches nothing, short of the kernel reusing the number for a new
// group leader after a wrap of the pid space.
func (p *Process) SignalGroup(sig syscall.Signal) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.exited.Load() {
		return syscall.Kill(-p.pid, sig)
	}
	return p.kill(sig)
}

// kill signals the group, or the process alone once it left the group;
// p.mu is held and the process has not been reaped.
func (p *Process) kill(sig syscall.Signal) error {
	err := syscall.Kill(-p.pid, sig)
	if err == syscall.ESRCH {
		err = syscall.Kill(p.pid, sig)
	}
	return err
}

// awaitExit returns once process pid has exited, without reaping it (so
// its pid stays its own until Wait). It waits in the netpoller on a pidfd
// of its own: os.Process.Wait blocks an OS thread in waitid(2) for the
// whole life of the process, and a runtime that has to make a thread per
// running command fails when the pids limit is reached (envd's
// ServerOptions.Blocking). Without pidfds it blocks a thread in
// waitid(WNOWAIT).
func awaitExit(pid int) {
	if fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK); err == nil {
		f := os.NewFile(uintptr(fd), "pidfd")
		defer f.Close()
		if pollExit(f) {
			return
		}
	}
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return // on an error, os.Process.Wait reports it
		}
	}
}

// pollExit parks until the pidfd reads ready (its process has exited); it
// is false when the fd cannot be polled.
func pollExit(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	ready := false
	err = rc.Read(func(fd uintptr) bool {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(pfd, 0)
			if err != unix.EINTR {
				ready = err == nil && n > 0
				// An error gives up: the caller then waits by waitid.
				return err != nil || n > 0
			}
		}
	})
	return err == nil && ready
}
