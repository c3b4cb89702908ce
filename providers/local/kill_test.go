package local_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/providers/local/container"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// helperEnv makes the test binary a creator process (see helperMain).
const helperEnv = "BERTH_LOCAL_TEST_HELPER"

// helperTTL is the TTL of the helper's sandbox.
const helperTTL = 2 * time.Second

// helperOptions are the test's local.Options, as startHelper passes them.
func helperOptions() local.Options {
	return local.Options{
		StateDir:     os.Getenv("BERTH_LOCAL_TEST_STATE"),
		AgentBinary:  os.Getenv("BERTH_LOCAL_TEST_AGENT"),
		CgroupParent: os.Getenv("BERTH_LOCAL_TEST_CGROUP"),
	}
}

// startHelper runs helperMain in a re-executed test binary with env added,
// and returns it with the words of the first line it printed (sandbox
// ids), which must be want of them.
func startHelper(t *testing.T, want int, env ...string) (*exec.Cmd, []string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1", "BERTH_LOCAL_TEST_STATE="+stateDir,
		"BERTH_LOCAL_TEST_AGENT="+agentBin, "BERTH_LOCAL_TEST_CGROUP="+cgroupParent)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	ids := strings.Fields(line)
	if err != nil || len(ids) != want {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper printed %q: %v", line, err)
	}
	return cmd, ids
}

// helperMain creates one sandbox with a short TTL, prints its id, and
// waits to be killed. It runs in a re-executed test binary.
func helperMain() int {
	if os.Getenv(poolHelperEnv) != "" {
		return poolHelperMain()
	}
	d, err := local.New(helperOptions())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	p := sandbox.NewProvider("local", d)
	sb, err := p.Create(context.Background(), sandbox.Spec{
		Image: local.DefaultImage, TTL: helperTTL, Labels: map[string]string{"test": "kill9"},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(sb.ID())
	select {} // until SIGKILL
}

// A sandbox outlives nothing: its creator is SIGKILLed right after
// creating it, and at its TTL the sandbox's processes are gone (the agent
// exited at its deadline), Reap removes every leftover (mount, cgroups,
// runtime state, directory) and List does not show it.
func TestCreatorKilled(t *testing.T) {
	needRoot(t)
	p := newDriver(t) // also makes this process the subreaper of orphans
	cmd, ids := startHelper(t, 1)
	id := ids[0]
	created := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	if pids := procsIn(id); len(pids) == 0 {
		t.Fatalf("sandbox %s has no processes right after create", id)
	}
	// Its processes end at the TTL, with nobody left to delete it.
	for len(procsIn(id)) > 0 {
		if time.Since(created) > helperTTL+10*time.Second {
			t.Fatalf("sandbox %s still has processes %v long after its TTL", id, procsIn(id))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if time.Since(created) < helperTTL-500*time.Millisecond {
		t.Fatalf("sandbox %s ended after %v, before its TTL", id, time.Since(created))
	}
	dir := filepath.Join(stateDir, "sandboxes", id)
	if _, err := os.Stat(dir); err != nil || len(mountsUnder(dir)) == 0 {
		t.Fatalf("nothing left for Reap to remove (dir: %v, mounts %v): the test proves nothing", err, mountsUnder(dir))
	}
	ids, err := p.Reap(testCtx(t))
	if err != nil || !slices.Contains(ids, id) {
		t.Fatalf("Reap = %v, %v; want %s among them", ids, err, id)
	}
	assertNoLeftovers(t, id)
	infos, err := p.List(testCtx(t), map[string]string{"test": "kill9"})
	if err != nil || len(infos) != 0 {
		t.Errorf("List after the TTL = %v, %v; want nothing", infos, err)
	}
}

// Reap removes what a dead sandbox left: here the agent is killed from the
// host (as the OOM killer or a crash would), so the record says the TTL is
// far away but the sandbox is dead.
func TestReapRemovesLeftovers(t *testing.T) {
	needRoot(t)
	p := newDriver(t)
	ctx := testCtx(t)
	sb, err := p.Create(ctx, driver.Spec{Image: local.DefaultImage, TTL: time.Hour, Network: driver.Network{Mode: driver.NetworkNone}})
	if err != nil {
		t.Fatal(err)
	}
	id := sb.ID()
	sb.Close()
	for _, pid := range procsIn(id) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(procsIn(id)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if len(mountsUnder(filepath.Join(stateDir, "sandboxes", id))) == 0 {
		t.Fatal("no mount left to reap: the test proves nothing")
	}
	ids, err := p.Reap(ctx)
	if err != nil || !slices.Contains(ids, id) {
		t.Fatalf("Reap = %v, %v; want %s among them", ids, err, id)
	}
	assertNoLeftovers(t, id)
	if _, err := p.Connect(ctx, id); errdefs.ClassOf(err) != errdefs.NotFound {
		t.Errorf("Connect after Reap: %v, want NotFound", err)
	}
}

// procsIn returns the host pids whose cgroup path names the sandbox.
func procsIn(id string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err == nil && strings.Contains(string(b), "/"+id+"\n") {
			pids = append(pids, pid)
		}
	}
	return pids
}

func assertNoLeftovers(t *testing.T, id string) {
	t.Helper()
	dir := filepath.Join(stateDir, "sandboxes", id)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("sandbox dir %s still there (%v)", dir, err)
	}
	if m := mountsUnder(dir); len(m) > 0 {
		t.Errorf("mounts left: %v", m)
	}
	if c := cgroupDirs(id); len(c) > 0 {
		t.Errorf("cgroups left: %v", c)
	}
	if _, err := os.Stat(filepath.Join(stateDir, "runc", id)); !os.IsNotExist(err) {
		t.Errorf("runtime state of %s left (%v)", id, err)
	}
	if pids := procsIn(id); len(pids) > 0 {
		t.Errorf("processes left: %v", pids)
	}
	// A disk's loop device clears itself a moment after its unmount.
	for try := 0; len(container.LoopDevicesOf(dir)) > 0 && try < 100; try++ {
		time.Sleep(20 * time.Millisecond)
	}
	if left := container.LoopDevicesOf(dir); len(left) > 0 {
		t.Errorf("loop devices left attached: %v", left)
	}
}

// A creator killed inside Create, after the runtime started the container
// and before anything recorded it, leaves a sandbox directory without a
// record, a running init, a mount and cgroups; Reap removes them all
// (through the runtime's own state), and leaves a sandbox being created
// alone while its creator holds the directory's lock.
func TestReapHalfMade(t *testing.T) {
	needRoot(t)
	p := newDriver(t)
	ctx := testCtx(t)
	sb, err := p.Create(ctx, driver.Spec{Image: local.DefaultImage, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	id := sb.ID()
	sb.Close()
	dir := filepath.Join(stateDir, "sandboxes", id)
	// What a creator killed there leaves: no meta.json, no container state.
	for _, f := range []string{"meta.json", "container/container.json"} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	// A fresh provider value, so no handle of the creator's helps.
	ids, err := newDriver(t).Reap(ctx)
	if err != nil || !slices.Contains(ids, id) {
		t.Fatalf("Reap = %v, %v; want %s among them", ids, err, id)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(procsIn(id)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	assertNoLeftovers(t, id)

	// A directory locked by its (live) creator is not touched.
	busy := filepath.Join(stateDir, "sandboxes", "sb-00000000000000aa")
	if err := os.Mkdir(busy, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(busy)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if ids, err := p.Reap(ctx); err != nil || slices.Contains(ids, "sb-00000000000000aa") {
		t.Errorf("Reap took a directory being created: %v, %v", ids, err)
	}
	if _, err := os.Stat(busy); err != nil {
		t.Errorf("the directory being created is gone: %v", err)
	}
	f.Close() // the creator died: its lock went with it
	if ids, err := p.Reap(ctx); err != nil || !slices.Contains(ids, "sb-00000000000000aa") {
		t.Errorf("Reap after the creator died = %v, %v", ids, err)
	}
}
