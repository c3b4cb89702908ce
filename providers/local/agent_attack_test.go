package local_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/sandbox"
)

// Attacks on the agent itself: the sandbox's PID 1, which serves the
// sandbox API from inside. Its death ends the sandbox, so a process inside
// must not be able to cause it.

// agentHostPid is the host pid of the sandbox's init (pid 1 inside).
func agentHostPid(t *testing.T, id string) int {
	t.Helper()
	for _, pid := range procsIn(id) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
				if f := strings.Fields(v); len(f) > 1 && f[len(f)-1] == "1" {
					return pid
				}
			}
		}
	}
	t.Fatalf("no init found in sandbox %s", id)
	return 0
}

// Every signal, 1 to 64, sent to pid 1 from inside leaves the agent
// serving (the kernel delivers to a namespace's init only the signals it
// handles, and the Go runtime handles them all; its default for SIGTERM,
// SIGINT and SIGHUP is to exit, for SIGQUIT, SIGSEGV and others to crash).
// The commands the agent starts still die of the signals sent to them:
// they inherit no ignored or blocked signal. SIGKILL from the host still
// ends the sandbox.
func TestAttackSignalInit(t *testing.T) {
	p := openProvider(t)
	sb := create(t, p, sandbox.Spec{})
	id := sb.ID()
	logAgentOnFailure(t, id)
	agent := agentHostPid(t, id)
	for sig := 1; sig <= 64; sig++ {
		script := fmt.Sprintf("kill -%d 1; sleep 0.02; echo sent", sig)
		res, err := sb.Run(testCtx(t), sandbox.Command{Args: []string{"sh", "-c", script}})
		if err == nil && strings.TrimSpace(string(res.Stdout)) == "sent" {
			// A stop lets the call in flight finish; the next one tells.
			res, err = sb.Run(testCtx(t), sandbox.Command{Args: []string{"echo", "sent"}})
		}
		if err != nil || strings.TrimSpace(string(res.Stdout)) != "sent" {
			t.Fatalf("signal %d (%v) to pid 1 from inside: %q %q %v; the agent died", sig, syscall.Signal(sig), res.Stdout, res.Stderr, err)
		}
	}
	// All at once, the way the brief's attacker would.
	sh(t, sb, "kill -TERM 1; kill -INT 1; kill -HUP 1; kill -QUIT 1; kill -SEGV 1; sleep 0.2")
	if got := sh(t, sb, "echo alive"); got != "alive" {
		t.Fatalf("after the signals: %q", got)
	}
	if now := agentHostPid(t, id); now != agent {
		t.Fatalf("the init is pid %d now, was %d", now, agent)
	}

	// What the agent starts is killable: by its own signal, and a child of
	// it by SIGTERM (143).
	if res := attempt(t, sb, "sh", "-c", "kill -TERM $$; echo survived"); res.ExitCode != 143 || len(res.Stdout) != 0 {
		t.Errorf("a command that SIGTERMs itself: exit %d, %q; want 143 and no output", res.ExitCode, res.Stdout)
	}
	if res := attempt(t, sb, "sh", "-c", "kill -INT $$; echo survived"); res.ExitCode != 130 || len(res.Stdout) != 0 {
		t.Errorf("a command that SIGINTs itself: exit %d, %q; want 130 and no output", res.ExitCode, res.Stdout)
	}
	if got := sh(t, sb, "sleep 100 & kill -TERM $!; wait $!; echo $?"); got != "143" {
		t.Errorf("a SIGTERMed child of a command exited %q, want 143", got)
	}
	// And nothing is inherited: no signal ignored or blocked.
	status := attempt(t, sb, "cat", "/proc/self/status")
	for _, field := range []string{"SigIgn", "SigBlk"} {
		if v := statusField(string(status.Stdout), field); v != "0000000000000000" {
			t.Errorf("a command the agent started has %s %q, want none", field, v)
		}
	}

	// SIGKILL from the host still ends the sandbox (and with it, its
	// processes).
	if err := syscall.Kill(agent, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(procsIn(id)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s still has processes %v after its init was SIGKILLed", id, procsIn(id))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// statusField is one field of a /proc/PID/status text.
func statusField(status, name string) string {
	for line := range strings.Lines(status) {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// bombPids is the pids limit of the bomb test's sandboxes: room for the
// agent's threads and some processes, small enough to fill at once.
const bombPids = 64

// A process that holds every pid of the sandbox while the API fires
// hundreds of file calls at once must not crash the agent. The Go runtime
// makes an OS thread whenever its goroutines block in system calls and no
// thread is idle; with the pids cgroup full that clone fails and the
// runtime aborts ("failed to create new OS thread"), ending the sandbox.
// Tree transfers for a user other than the agent's switch credentials on a
// thread of their own, which must not be lost afterwards.
func TestAttackForkBombWithFileCalls(t *testing.T) {
	needRoot(t)
	o := options()
	o.Pids = bombPids
	d, err := local.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	p := sandbox.NewProvider("local", d)
	// Sizes at which the agent without its bounds died: the first in about
	// two runs of three, the second (each transfer as nobody ended a
	// thread) in every run.
	t.Run("file calls", func(t *testing.T) { bombWithCalls(t, p, "", 4, 1000, 256<<10) })
	t.Run("trees as nobody", func(t *testing.T) { bombWithCalls(t, p, "nobody", 5, 400, 256<<10) })
}

// bombWithCalls fills the pids of a sandbox for user and makes calls
// concurrent file calls of the first kinds of fileCall, of size bytes
// each, while they are full.
func bombWithCalls(t *testing.T, p *sandbox.Provider, user string, kinds, calls, size int) {
	sb := create(t, p, sandbox.Spec{User: user})
	id := sb.ID()
	logAgentOnFailure(t, id)
	agent := agentHostPid(t, id)
	idle, _ := sandboxCgroupFile(t, id, "pids.current")
	idleTasks, err := strconv.Atoi(idle)
	if err != nil {
		t.Fatalf("pids.current %q: %v", idle, err)
	}
	ctx := testCtx(t)
	const dir = "/tmp/bomb"
	blob := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	if err := sb.WriteFile(ctx, dir+"/seed", blob, 0o644); err != nil {
		t.Fatal(err)
	}

	// awk's system() survives a failed fork, so each loop keeps taking
	// every pid that comes free for as long as it runs.
	events := pidsFailed(t, id)
	bomb := strings.Repeat(`awk 'BEGIN { while (1) system("sleep 600 &") }' </dev/null >/dev/null 2>&1 & `, 2)
	if _, err := sb.Run(ctx, sandbox.Command{Args: []string{"sh", "-c", bomb}}); err != nil {
		t.Fatalf("starting the bomb: %v", err)
	}
	waitPidsFailed(t, id, events+1)

	var wg sync.WaitGroup
	errs := make(chan error, calls)
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- fileCall(ctx, sb, kinds, i, dir, blob)
		}()
	}
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if err != nil {
			if failed++; failed <= 3 {
				t.Errorf("file call during the bomb: %v", err)
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d file calls failed during the bomb", failed, calls)
	}
	// awk's children come and go: a pid or two may be free at any moment.
	cur, _ := sandboxCgroupFile(t, id, "pids.current")
	if n, _ := strconv.Atoi(cur); n < bombPids-4 || pidsFailed(t, id) <= events+1 {
		t.Errorf("the bomb did not hold the pids during the calls (pids.current %s, %d forks refused): the test proves nothing", cur, pidsFailed(t, id)-events)
	}
	killSandboxProcsButInit(t, id)
	waitPidsBelow(t, id, idleTasks+5)
	if now := agentHostPid(t, id); now != agent {
		t.Fatalf("the init is pid %d now, was %d", now, agent)
	}
	if got := sh(t, sb, "wc -c < /tmp/bomb/seed"); got != strconv.Itoa(len(blob)) {
		t.Errorf("sandbox after the bomb: %q", got)
	}
}

// fileCall is call i of the bomb test: a write, read, stat, listing or
// tree transfer, in turn, the first kinds of them.
func fileCall(ctx context.Context, sb *sandbox.Sandbox, kinds, i int, dir string, blob []byte) error {
	p := fmt.Sprintf("%s/f%d", dir, i)
	switch i % kinds {
	case 0:
		return sb.WriteFile(ctx, p, blob, 0o644)
	case 1:
		b, err := sb.ReadFile(ctx, dir+"/seed")
		if err == nil && !bytes.Equal(b, blob) {
			err = fmt.Errorf("read %d bytes back, want %d", len(b), len(blob))
		}
		return err
	case 2:
		_, err := sb.Stat(ctx, dir+"/seed")
		return err
	case 3:
		_, err := sb.ListDir(ctx, dir)
		return err
	default:
		var tb bytes.Buffer
		tw := tar.NewWriter(&tb)
		tw.WriteHeader(&tar.Header{Name: "t", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(blob))})
		tw.Write(blob)
		tw.Close()
		up := filepath.Join(dir, fmt.Sprintf("tree%d", i))
		if err := sb.Upload(ctx, up, &tb); err != nil {
			return err
		}
		rc, err := sb.Download(ctx, up)
		if err != nil {
			return err
		}
		defer rc.Close()
		_, err = io.Copy(io.Discard, rc)
		return err
	}
}
