package hostproc

import (
	"bufio"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/internal/syncbuf"
)

// The copies disagreed on a process killed by a signal: envd, the fake
// and daytonatest said 128+n, modaltest's exit code said 0 (its wire
// carries the signal apart). Exit has both: Code 128+n, as a shell
// reports it, and Signal for a wire that wants it.
func TestSignalledExit(t *testing.T) {
	ex, _, _ := run(t, Spec{}, "kill -TERM $$")
	if ex.Code != 143 || ex.Signal != syscall.SIGTERM || ex.Err != nil || ex.TimedOut {
		t.Errorf("killed by SIGTERM: %+v, want code 143, signal SIGTERM", ex)
	}
	ex, out, errs := run(t, Spec{}, "echo out; echo err >&2; exit 3")
	if ex.Code != 3 || ex.Signal != 0 || out != "out\n" || errs != "err\n" {
		t.Errorf("exit 3: %+v, %q, %q", ex, out, errs)
	}
}

func TestStdinEnvDir(t *testing.T) {
	dir := t.TempDir()
	var out syncbuf.Buffer
	p := sh(t, Spec{Stdin: true, Stdout: &out, Dir: dir, Env: Environ(nil, map[string]string{"GREETING": "hi"})},
		`printf '%s %s ' "$GREETING" "$(pwd)"; cat`)
	if _, err := io.WriteString(p.Stdin(), "from stdin"); err != nil {
		t.Fatal(err)
	}
	p.Stdin().Close()
	if ex := p.Wait(); ex.Code != 0 || out.String() != "hi "+dir+" from stdin" {
		t.Errorf("%+v, %q", ex, out.String())
	}
	// Without Spec.Stdin the process reads EOF.
	if ex, out, _ := run(t, Spec{}, "cat; echo done"); ex.Code != 0 || out != "done\n" {
		t.Errorf("no stdin: %+v, %q", ex, out)
	}
}

// leftover starts a shell that leaves `sleep` running in its group and
// exits once stdin closes; it returns the process and a pidfd of sleep.
func leftover(t *testing.T, spec Spec) (*Process, *os.File) {
	t.Helper()
	pr, pw := io.Pipe()
	spec.Stdin, spec.Stdout = true, pw
	p := sh(t, spec, "sleep 60 & echo $!; read x; exit 0")
	line, err := bufio.NewReader(pr).ReadString('\n')
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	t.Cleanup(func() { pw.Close() })
	pid, _ := strconv.Atoi(strings.TrimSpace(line))
	fd, perr := unix.PidfdOpen(pid, 0)
	if err != nil || perr != nil {
		t.Fatalf("sleep's pid %q: %v, %v", line, err, perr)
	}
	pidfd := os.NewFile(uintptr(fd), "pidfd")
	t.Cleanup(func() { pidfd.Close() })
	return p, pidfd
}

func alive(t *testing.T, pidfd *os.File) bool {
	t.Helper()
	n, err := unix.Poll([]unix.PollFd{{Fd: int32(pidfd.Fd()), Events: unix.POLLIN}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return n == 0
}

// awaitGone waits until the pidfd's process has exited.
func awaitGone(t *testing.T, pidfd *os.File) {
	t.Helper()
	if _, err := unix.Poll([]unix.PollFd{{Fd: int32(pidfd.Fd()), Events: unix.POLLIN}}, int(time.Minute/time.Millisecond)); err != nil {
		t.Fatal(err)
	}
}

// Wait does not wait for what a process left running (it holds stdout
// open): output stops after Grace. Without KillGroupAtExit that is left
// running; SignalGroup still reaches it, Signal no longer does.
func TestLeftoverOutlivesWait(t *testing.T) {
	p, sleep := leftover(t, Spec{})
	p.Stdin().Close()
	if ex := p.Wait(); ex.Code != 0 {
		t.Fatalf("exit %+v", ex)
	}
	if !alive(t, sleep) {
		t.Fatal("the leftover sleep died with its shell")
	}
	if err := p.Signal(syscall.SIGKILL); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("Signal after the exit: %v, want ESRCH", err)
	}
	if err := p.SignalGroup(syscall.SIGKILL); err != nil {
		t.Fatalf("SignalGroup: %v", err)
	}
	awaitGone(t, sleep)
}

// With KillGroupAtExit the command is over when its leader is.
func TestKillGroupAtExit(t *testing.T) {
	p, sleep := leftover(t, Spec{KillGroupAtExit: true})
	p.Stdin().Close()
	p.Wait()
	awaitGone(t, sleep)
}

// Signal reaches the whole group while the leader runs.
func TestSignalKillsGroup(t *testing.T) {
	p, sleep := leftover(t, Spec{})
	if err := p.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if ex := p.Wait(); ex.Code != 137 {
		t.Errorf("exit %+v, want 137", ex)
	}
	awaitGone(t, sleep)
}

func TestTimeout(t *testing.T) {
	ex, _, _ := run(t, Spec{Timeout: 50 * time.Millisecond}, "sleep 60")
	if !ex.TimedOut || ex.Signal != syscall.SIGKILL {
		t.Errorf("exit %+v, want timed out by SIGKILL", ex)
	}
	if ex, _, _ := run(t, Spec{Timeout: time.Minute}, "true"); ex.TimedOut || ex.Code != 0 {
		t.Errorf("a quick command under a timeout: %+v", ex)
	}
}

// What LookPath and Start refuse reads as a shell's 126 or 127.
func TestShellStatus(t *testing.T) {
	dir := t.TempDir()
	garbage := dir + "/garbage"
	writeFile(t, garbage, "\x00\x01not a program", 0o755)
	_, err := Start(ctxT(t), Spec{Path: garbage, Args: []string{"garbage"}})
	if code, ok := ShellStatus(err); code != 126 || !ok || !strings.Contains(err.Error(), "exec format error") {
		t.Errorf("exec format error: %v, status %d %v; want 126", err, code, ok)
	}
	_, err = LookPath("no-such-program-berth", Lookup{PATH: "/bin"})
	if code, ok := ShellStatus(err); code != 127 || !ok || !strings.Contains(err.Error(), "no-such-program-berth") {
		t.Errorf("missing program: %v, status %d %v; want 127", err, code, ok)
	}
}
