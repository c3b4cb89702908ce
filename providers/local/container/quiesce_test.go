package container

import (
	"context"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// KillAllButInit ends every process of the container but its init, a
// fork bomb among them (the freeze keeps it from forking while the rest
// dies), and the container goes on: the init lives and new processes
// start. The init is the reaping agent, as in a sandbox: killed orphans
// keep their pids charge until their reaper waits for them, and an init
// that never waits (sleep) would leave the limit spent for good.
func TestKillAllButInit(t *testing.T) {
	needRoot(t)
	r := testRuntime(t)
	c, _ := agentConfig(t)
	c.Limits.Pids = 256
	ct := create(t, r, c)
	// Background sleepers, a bomb that forks until the pids limit, and a
	// loop that respawns a child as soon as it dies.
	if out, code := execIn(t, r, ct, "sh", "-c", `
		for i in 1 2 3 4 5; do sleep 600 >/dev/null 2>&1 & done
		(b() { b & b & wait; }; b) >/dev/null 2>&1 &
		(while :; do sleep 600; done) >/dev/null 2>&1 &
		exit 0`); code != 0 {
		t.Fatalf("start the processes: %d %s", code, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(ct.procs()) < 20 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(ct.procs()); n < 20 {
		t.Fatalf("only %d processes besides the init: the test proves nothing", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ct.KillAllButInit(ctx); err != nil {
		t.Fatal(err)
	}
	if left := ct.procs(); len(left) > 0 {
		t.Errorf("processes left: %v", left)
	}
	if err := unix.Kill(ct.Pid(), 0); err != nil {
		t.Fatalf("the init died: %v", err)
	}
	// The killed processes leave the cgroup's list at once but hold their
	// pids charge until the init reaps them, which it does as it goes on;
	// a new process needs that charge back (runc's exec starts threads).
	var cur int
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cur = atoi(t, readCgroup(t, ct, "pids", "pids.current")); cur < 64 {
			break
		}
	}
	if cur >= 64 {
		t.Fatalf("pids.current still %d: the init did not reap the killed processes", cur)
	}
	if out, code := execIn(t, r, ct, "echo", "alive"); code != 0 || out != "alive\n" {
		t.Errorf("after: %q %d", out, code)
	}
	if slices.Contains(ct.procs(), ct.Pid()) {
		t.Errorf("procs lists the init")
	}
}
