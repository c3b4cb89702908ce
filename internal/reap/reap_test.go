package reap

import (
	"fmt"
	"os"
	"os/exec"
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

func TestOrphansReapsOrphans(t *testing.T) {
	if !PidfdsWork() {
		t.Skip("pidfds unavailable on this kernel")
	}
	// sh starts a background child and exits: the child is re-parented to
	// us (a subreaper) and, once it exits, nobody but us can reap it.
	out, err := exec.Command("sh", "-c", "sleep 0.05 & echo $!").Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
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
