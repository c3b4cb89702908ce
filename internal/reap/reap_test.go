package reap

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	// Orphans of the test's children must come to the test process.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "subreaper:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// waitZombie polls until pid is a zombie child of this process.
func waitZombie(t *testing.T, pid int) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		if slices.Contains(zombieChildren(os.Getpid()), pid) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("pid %d never became a zombie child", pid)
}

func TestOrphansSparesExecChildren(t *testing.T) {
	if !PidfdsWork() {
		t.Skip("pidfds unavailable on this kernel")
	}
	cmd := exec.Command("sh", "-c", "exit 7")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitZombie(t, cmd.Process.Pid)
	if reaped := Orphans(); slices.Contains(reaped, cmd.Process.Pid) {
		t.Fatalf("reaped the os/exec child %d", cmd.Process.Pid)
	}
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 7 {
		t.Fatalf("cmd.Wait = %v, want exit status 7 (the status was stolen)", err)
	}
}

// startOrphan has sh start a background child and exit: the child is
// re-parented to us (a subreaper) and, once it exits 50 ms later, nobody
// but us can reap it. It returns the child's pid.
func startOrphan(t *testing.T) int {
	t.Helper()
	out, err := exec.Command("sh", "-c", "sleep 0.05 & echo $!").Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func TestOrphansReapsOrphans(t *testing.T) {
	if !PidfdsWork() {
		t.Skip("pidfds unavailable on this kernel")
	}
	pid := startOrphan(t)
	waitZombie(t, pid)
	if reaped := Orphans(); !slices.Contains(reaped, pid) {
		t.Fatalf("orphan %d not reaped (reaped %v)", pid, reaped)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); !os.IsNotExist(err) {
		t.Fatalf("orphan %d still in /proc", pid)
	}
}

func TestPidfdTargets(t *testing.T) {
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		t.Skip("pidfds unavailable:", err)
	}
	defer unix.Close(fd)
	if !pidfdTargets()[os.Getpid()] {
		t.Fatalf("own pidfd %d not found in %v", fd, pidfdTargets())
	}
}

// childrenOf finds children forked from any thread of this process, as the
// full /proc scan does.
func TestChildrenOfEveryThread(t *testing.T) {
	if _, ok := childrenOf(os.Getpid()); !ok {
		t.Skip("no /proc/PID/task/TID/children on this kernel: the full scan is used")
	}
	cmds := make([]*exec.Cmd, 8)
	errs := make(chan error, len(cmds))
	hold := make(chan struct{})
	for i := range cmds {
		cmds[i] = exec.Command("sleep", "30")
		go func(c *exec.Cmd) {
			// Fork from threads of their own that stay alive, so that the
			// children belong to threads other than the main one.
			runtime.LockOSThread()
			errs <- c.Start()
			<-hold
		}(cmds[i])
	}
	defer close(hold)
	for range cmds {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
	}()
	got, _ := childrenOf(os.Getpid())
	all := allPids()
	for _, c := range cmds {
		if !slices.Contains(got, c.Process.Pid) || !slices.Contains(all, c.Process.Pid) {
			t.Errorf("child %d: in childrenOf %v, in the /proc scan %v", c.Process.Pid, slices.Contains(got, c.Process.Pid), slices.Contains(all, c.Process.Pid))
		}
	}
}

func TestAnyZombiePeeksWithoutReaping(t *testing.T) {
	if anyZombie() {
		t.Skip("this test process already has a zombie child")
	}
	cmd := exec.Command("sh", "-c", "exit 3")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitZombie(t, cmd.Process.Pid)
	if !anyZombie() {
		t.Fatal("anyZombie = false with a zombie child")
	}
	// The peek left the status for its owner.
	if err := cmd.Wait(); err == nil || cmd.ProcessState.ExitCode() != 3 {
		t.Fatalf("cmd.Wait = %v, want exit status 3", err)
	}
	if anyZombie() {
		t.Fatal("anyZombie = true after the only zombie was waited for")
	}
}

func TestLoopReapsOrphanAfterSIGCHLD(t *testing.T) {
	if !PidfdsWork() {
		t.Skip("pidfds unavailable on this kernel")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); Loop(ctx) }()
	defer func() { cancel(); <-done }()
	pid := startOrphan(t)
	// Well before reapInterval: the SIGCHLD of the orphan's exit drives it.
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); os.IsNotExist(err) {
			return
		}
	}
	t.Fatalf("orphan %d not reaped within 2s of its exit", pid)
}
