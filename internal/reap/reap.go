// Package reap reaps zombie children that nobody else will wait for,
// without stealing the exit status of processes started with os/exec. The
// agent (PID 1 of a sandbox) and package container (a child subreaper of the
// container inits) import it.
package reap

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// How to reap without stealing.
//
// The kernel re-parents every orphan to its pid namespace's init or to the
// nearest child subreaper above it, which must wait for it or it stays a
// zombie forever (and a zombie in a dying pid namespace keeps its init from
// exiting). A blind wait4(-1) would also reap the children this process
// started with os/exec, whose cmd.Wait would then fail with ECHILD and lose
// the exit code.
//
// Since Go 1.23, os.StartProcess creates each child with CLONE_PIDFD and
// keeps that pidfd open until Wait (or Release); the kernel installs it in
// our fd table before the child can run, so there is no window in which an
// os/exec child exists without it. The reaper therefore reaps a zombie child
// only if no pidfd in this process refers to it: orphans, and processes
// whose owner gave them up. /proc/self/fdinfo/N of a pidfd has a "Pid:" line.
//
// Known limit: a child started by code that forks without a pidfd (raw
// syscall.ForkExec, or Go on a kernel without pidfd support, < 5.4) would be
// reaped here too. Loop checks that pidfds work and does not reap otherwise.

// reapInterval is a backstop for zombies whose SIGCHLD came while their
// pidfd was still held (then released without a wait).
const reapInterval = 10 * time.Second

// reapDelay is how long Loop waits after a SIGCHLD before it looks: every
// exec of a busy agent ends with a SIGCHLD, and a scan at each one ran
// beside the exec's own completion on the same cores (an orphan waiting a
// few ms more to be reaped costs nothing). Signals in the window coalesce.
const reapDelay = 20 * time.Millisecond

// PidfdsWork reports whether this kernel (and seccomp filter) lets us open a
// pidfd, as Go's os package needs for the scheme above.
func PidfdsWork() bool {
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// Loop reaps unowned zombie children reapDelay after a SIGCHLD (and every
// reapInterval) until ctx ends. It returns at once, reaping nothing, if
// pidfds do not work here.
func Loop(ctx context.Context) {
	if !PidfdsWork() {
		return
	}
	ch := make(chan os.Signal, 16)
	signal.Notify(ch, unix.SIGCHLD)
	defer signal.Stop(ch)
	t := time.NewTicker(reapInterval)
	defer t.Stop()
	delay := time.NewTimer(reapDelay)
	armed := true // the first look, at start
	for {
		select {
		case <-ctx.Done():
			delay.Stop()
			return
		case <-ch:
			if !armed {
				delay.Reset(reapDelay)
				armed = true
			}
			continue
		case <-delay.C:
			armed = false
		case <-t.C:
		}
		Orphans()
	}
}

// anyZombie peeks, without reaping, whether some child has exited and not
// been waited for. Most SIGCHLDs are os/exec children whose owners have
// already waited by the time Loop looks: then there is nothing to scan.
func anyZombie() bool {
	var info unix.Siginfo // zeroed: Signo stays 0 when no child is waitable
	err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return err == nil && info.Signo == int32(unix.SIGCHLD)
}

// Orphans reaps every zombie child that no pidfd of ours refers to, once,
// and returns their pids.
func Orphans() []int {
	if !anyZombie() {
		return nil
	}
	zombies := zombieChildren(os.Getpid())
	if len(zombies) == 0 {
		return nil
	}
	owned := pidfdTargets()
	var reaped []int
	for _, pid := range zombies {
		if owned[pid] {
			continue // its os/exec owner will Wait for it
		}
		var ws unix.WaitStatus
		if got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); err == nil && got == pid {
			reaped = append(reaped, pid)
		}
	}
	return reaped
}

// zombieChildren lists the children of parent that are zombies, from
// /proc/PID/stat of each child.
func zombieChildren(parent int) []int {
	pids, ok := childrenOf(parent)
	if !ok {
		pids = allPids()
	}
	var out []int
	for _, pid := range pids {
		state, ppid, ok := statOf(pid)
		if ok && state == 'Z' && ppid == parent {
			out = append(out, pid)
		}
	}
	return out
}

// childrenOf lists the children of parent from the "children" file of each
// of its threads (a child belongs to the thread that forked it, an orphan
// to the thread it was handed to). That reads a file per thread instead of
// one per process on the host, on every SIGCHLD. It may miss a child that
// came during the read: the next SIGCHLD or tick finds it. ok is false on
// kernels without the files (CONFIG_PROC_CHILDREN).
func childrenOf(parent int) (pids []int, ok bool) {
	base := "/proc/" + strconv.Itoa(parent) + "/task/"
	d, err := os.Open(base)
	if err != nil {
		return nil, false
	}
	tids, _ := d.Readdirnames(-1)
	d.Close()
	for _, tid := range tids {
		b, err := os.ReadFile(base + tid + "/children")
		if errors.Is(err, fs.ErrNotExist) && !ok {
			if _, serr := os.Stat(base + tid); serr == nil {
				return nil, false // the thread is there; its file is not
			}
		}
		if err != nil {
			continue // the thread ended
		}
		ok = true
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids, ok
}

// allPids lists every process in /proc.
func allPids() []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	var out []int
	for _, n := range names {
		if pid, err := strconv.Atoi(n); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// statOf returns the state and parent pid from /proc/PID/stat.
func statOf(pid int) (state byte, ppid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// "pid (comm) S ppid ...": comm may hold spaces and ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 || len(f[0]) != 1 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	if err != nil {
		return 0, 0, false
	}
	return f[0][0], ppid, true
}

// pidfdTargets returns the pids our open pidfds refer to.
func pidfdTargets() map[int]bool {
	out := map[int]bool{}
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return out
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	for _, n := range names {
		link, err := os.Readlink("/proc/self/fd/" + n)
		// "anon_inode:[pidfd]" before Linux 6.9, "pidfd:[ino]" on pidfs.
		if err != nil || !strings.Contains(link, "pidfd") {
			continue
		}
		info, err := os.ReadFile("/proc/self/fdinfo/" + n)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "Pid:"); ok {
				if pid, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && pid > 0 {
					out[pid] = true
				}
			}
		}
	}
	return out
}
