package container

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/internal/reap"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// SetSubreaper makes this process the child subreaper of its descendants
// (prctl PR_SET_CHILD_SUBREAPER). The runtime's init of every container is
// orphaned when `runc run --detach` exits; without this it is re-parented to
// the host's PID 1, and on a host whose PID 1 does not reap (a minimal VM
// init, some CI sandboxes) every deleted container leaves a zombie. With it,
// the container handle reaps its init. Call it once, early, from the program
// that creates containers.
//
// Every orphan below this process then comes to it, including processes
// that `runc exec` left in a container: while one of those is an unreaped
// zombie, the kernel cannot finish killing the container's pid namespace.
// So SetSubreaper also starts a reaper (package internal/reap) that reaps
// the zombie children no pidfd of this process refers to, which leaves
// os/exec children and container inits to their owners.
func SetSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("become child subreaper: %w", err)
	}
	reaperOnce.Do(func() { go reap.Loop(context.Background()) })
	return nil
}

var reaperOnce sync.Once

// proc is a process known by a pidfd: signals and waits cannot hit a
// recycled pid. One goroutine per proc waits for the exit through the Go
// poller (no thread is blocked) and reaps the process when it is a child.
type proc struct {
	pid  int
	f    *os.File // the pidfd, non-blocking
	done chan struct{}

	mu     sync.Mutex
	status int // exit status when reaped here, -1 otherwise
}

// openProc opens a pidfd for pid. startTime, when not zero, must match the
// process's start time (field 22 of /proc/pid/stat), so that a pid read from
// a file cannot name a different, newer process.
func openProc(pid int, startTime uint64) (*proc, error) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil, errdefs.Errorf(errdefs.NotFound, "process %d: %w", pid, err)
		}
		return nil, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	f := os.NewFile(uintptr(fd), "pidfd:"+strconv.Itoa(pid))
	if startTime != 0 {
		st, err := procStartTime(pid)
		if err != nil || st != startTime {
			f.Close()
			return nil, errdefs.Errorf(errdefs.NotFound, "process %d: gone (pid reused)", pid)
		}
	}
	p := &proc{pid: pid, f: f, done: make(chan struct{}), status: -1}
	go p.watch()
	return p, nil
}

// watch waits until the process has exited and reaps it if it is our child.
func (p *proc) watch() {
	defer close(p.done)
	rc, err := p.f.SyscallConn()
	if err != nil {
		return
	}
	// A pidfd polls readable once the process has exited; Read parks the
	// goroutine in the poller until then.
	_ = rc.Read(func(fd uintptr) bool {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		return err == nil && n > 0
	})
	_ = rc.Control(func(fd uintptr) {
		// WNOWAIT first: only a child of ours may be reaped, and the zombie
		// keeps its pid reserved until the wait4 below.
		var info unix.Siginfo
		if unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil) != nil {
			return // not our child (ECHILD): its parent reaps it
		}
		var ws unix.WaitStatus
		if _, err := unix.Wait4(p.pid, &ws, unix.WNOHANG, nil); err == nil {
			p.mu.Lock()
			p.status = waitStatus(ws)
			p.mu.Unlock()
		}
	})
}

// waitStatus is a shell-style status: the exit code, or 128+signal.
func waitStatus(ws unix.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// signal sends sig to the process; an exited process is not an error.
func (p *proc) signal(sig unix.Signal) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	rc, err := p.f.SyscallConn()
	if err != nil {
		return nil // closed: the process is gone
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.PidfdSendSignal(int(fd), sig, nil, 0)
	}); err != nil {
		return nil
	}
	if serr != nil && !errors.Is(serr, unix.ESRCH) {
		return fmt.Errorf("signal %d to pid %d: %w", sig, p.pid, serr)
	}
	return nil
}

// wait blocks until the process has exited or ctx is done. It returns the
// exit status, or -1 when the process was not ours to reap.
func (p *proc) wait(ctx context.Context) (int, error) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.status, nil
	case <-ctx.Done():
		return -1, ctx.Err()
	}
}

// exited reports whether the process has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// close releases the pidfd; a pending watch returns.
func (p *proc) close() { p.f.Close() }

// procStartTime returns field 22 of /proc/pid/stat, the start time in clock
// ticks since boot: with the pid it names one process for good.
func procStartTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// comm may hold spaces and parentheses: fields start after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); field 22 is f[19].
	if len(f) < 20 {
		return 0, fmt.Errorf("parse /proc/%d/stat: %d fields", pid, len(f))
	}
	return strconv.ParseUint(f[19], 10, 64)
}
