package container

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

func TestDeleteWithCancelledContext(t *testing.T) {
	needRoot(t)
	r := testRuntime(t)
	ct := create(t, r, testConfig(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ct.Delete(ctx); err != nil {
		t.Fatalf("delete with a cancelled ctx: %v", err)
	}
	assertGone(t, r, ct)
}

func TestDeleteTwice(t *testing.T) {
	needRoot(t)
	r := testRuntime(t)
	ct := create(t, r, testConfig(t))
	if err := ct.Delete(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := ct.Delete(context.Background()); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if err := ct.Kill(context.Background(), unix.SIGTERM); errdefs.ClassOf(err) != errdefs.NotFound {
		t.Fatalf("kill after delete: %v, want NotFound", err)
	}
	assertGone(t, r, ct)
}

func TestKillAndWait(t *testing.T) {
	needRoot(t)
	r := testRuntime(t)
	ct := create(t, r, testConfig(t))
	if err := ct.Kill(context.Background(), unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	code, err := ct.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The test binary is a child subreaper, so it reaped the init itself.
	if code != 128+int(unix.SIGKILL) {
		t.Fatalf("exit status %d, want %d", code, 128+int(unix.SIGKILL))
	}
}

func TestAgentExitsAtDeadlineAndLoadDeletes(t *testing.T) {
	needRoot(t)
	r := testRuntime(t)
	c, sock := agentConfig(t)
	// Long enough that a loaded machine's create (runc, then reading the
	// init's /proc entry) is done before the init is gone.
	c.Env = []string{"TESTINIT_DEADLINE=" + deadlineIn(1500)}
	ct := create(t, r, c)
	if got := agentGet(t, sock, "/hello"); got == "" {
		t.Fatal("agent did not answer")
	}
	// The agent ends the container at its deadline without help.
	code, err := ct.Wait(context.Background())
	if err != nil || code != 0 {
		t.Fatalf("init exit %d, %v; want a clean exit at the deadline", code, err)
	}
	// Another process finds what is left from the dir alone and removes it.
	loaded, err := r.Load(context.Background(), ct.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if err := loaded.Delete(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertGone(t, r, ct)
}

func TestLoadRunning(t *testing.T) {
	needRoot(t)
	r := testRuntime(t)
	ct := create(t, r, testConfig(t))
	loaded, err := r.Load(context.Background(), ct.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Pid() != ct.Pid() || loaded.ID() != ct.ID() {
		t.Fatalf("loaded %s/%d, created %s/%d", loaded.ID(), loaded.Pid(), ct.ID(), ct.Pid())
	}
	if err := loaded.Delete(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertGone(t, r, ct)
	if _, err := r.Load(context.Background(), ct.Dir()); errdefs.ClassOf(err) != errdefs.NotFound {
		t.Fatalf("load after delete: %v, want NotFound", err)
	}
}

// TestCreateCancelledAnywhere cancels Create at different points; whatever
// the point, it either succeeds or leaves nothing behind.
func TestCreateCancelledAnywhere(t *testing.T) {
	needRoot(t)
	r := testRuntime(t)
	for _, d := range []time.Duration{0, time.Millisecond, 3 * time.Millisecond, 8 * time.Millisecond,
		15 * time.Millisecond, 25 * time.Millisecond, 40 * time.Millisecond} {
		c := testConfig(t)
		ctx, cancel := context.WithTimeout(context.Background(), d)
		ct, err := r.Create(ctx, c)
		cancel()
		if err == nil {
			deleteGone(t, r, ct)
			continue
		}
		assertNoDir(t, c.Dir)
		if r.stateExists(c.ID) {
			t.Errorf("%v: runtime state left", d)
		}
		for h, p := range expectedCgroups(filepath.Join(r.CgroupParent, c.ID)) {
			if _, err := os.Stat(p); err == nil {
				t.Errorf("%v: %s cgroup left: %s", d, h, p)
			}
		}
		mi, _ := os.ReadFile("/proc/self/mountinfo")
		if strings.Contains(string(mi), c.Dir) {
			t.Errorf("%v: mount left", d)
		}
	}
}
