package pid1

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// startPID1 runs the agent (the test binary again, see TestMain) as PID 1
// of a new pid namespace, with deadline dl, and waits until it answers.
func startPID1(t *testing.T, dl time.Time) (*exec.Cmd, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a new pid namespace needs root")
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+sock, helperDeadlineEnv+"="+dl.Format(time.RFC3339Nano))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	if err := cmd.Start(); err != nil {
		t.Skipf("no new pid namespace here: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for i := 0; ; i++ {
		if _, err := GetDeadline(context.Background(), sock, ""); err == nil {
			return cmd, sock
		}
		if i > 2000 {
			t.Fatal("agent never answered")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// As PID 1 no signal a process can catch ends the agent, though Go's
// default for each of these is to exit or crash: a sandbox's processes
// can send them to pid 1. Its deadline still ends it.
func TestPID1DropsFatalSignals(t *testing.T) {
	cmd, sock := startPID1(t, time.Now().Add(3*time.Second))
	sigs := []syscall.Signal{unix.SIGUSR1, unix.SIGUSR2, unix.SIGALRM}
	for _, s := range fatalSignals {
		sigs = append(sigs, s.(syscall.Signal))
	}
	for _, s := range sigs {
		if err := cmd.Process.Signal(s); err != nil {
			t.Fatalf("%v: %v", s, err)
		}
		if _, err := GetDeadline(context.Background(), sock, ""); err != nil {
			t.Fatalf("after %v the agent does not answer: %v", s, err)
		}
	}
	var ee *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 4 {
		t.Fatalf("agent ended with %v, want exit 4 (its deadline)", err)
	}
}

// SIGKILL, which the host sends to end a sandbox, still ends it.
func TestPID1DiesOfSIGKILL(t *testing.T) {
	cmd, _ := startPID1(t, time.Time{})
	cmd.Process.Signal(unix.SIGTERM)
	if err := cmd.Process.Signal(unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != unix.SIGKILL {
		t.Fatalf("agent after SIGKILL: %v, want killed by it", err)
	}
}
