package container

import (
	"context"
	"os"
	"strings"
	"testing"
)

// prepare prepares c and registers a Delete that must succeed.
func prepare(t *testing.T, r Runtime, c Config) *Container {
	t.Helper()
	ct, err := r.Prepare(context.Background(), c)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	t.Cleanup(func() {
		if err := ct.Delete(context.Background()); err != nil {
			t.Errorf("cleanup delete: %v", err)
		}
	})
	return ct
}

// A prepared container's init is the runtime's, waiting: Init runs only
// after Start, in the same process, and answers on the listener it got.
func TestPrepareThenStart(t *testing.T) {
	needRoot(t)
	r := testRuntime(t)
	c, sock := agentConfig(t)
	ct := prepare(t, r, c)
	if comm := readComm(t, ct.Pid()); comm != "runc:[2:INIT]" && comm != "runc" {
		t.Errorf("prepared init is %q, want the runtime's waiting init", comm)
	}
	if err := ct.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	hello := agentGet(t, sock, "/hello")
	if !strings.HasPrefix(hello, "pid=1 host="+c.ID) {
		t.Errorf("agent answered %q, want pid 1 on host %s", hello, c.ID)
	}
	if comm := readComm(t, ct.Pid()); comm != "agent" {
		t.Errorf("started init is %q, want the agent (/.berth/agent) at the same pid", comm)
	}
	if err := ct.Start(context.Background()); err == nil {
		t.Errorf("a second Start succeeded")
	}
}

// A container deleted before Start leaves nothing, and cannot start after.
func TestPreparedDeleteLeavesNothing(t *testing.T) {
	needRoot(t)
	r := testRuntime(t)
	ct, err := r.Prepare(context.Background(), testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	deleteGone(t, r, ct)
	if err := ct.Start(context.Background()); err == nil {
		t.Errorf("Start after Delete succeeded")
	}
}

// SetLimits changes a running container's limits both ways (a raise of
// the memory limit must grow memsw first on cgroup v1), and zero lifts them.
func TestSetLimits(t *testing.T) {
	needRoot(t)
	r := testRuntime(t)
	c := testConfig(t)
	c.Limits.Pids = 100
	ct := create(t, r, c)
	if _, ok := ct.CgroupPaths()["memory"]; !ok {
		t.Skip("cgroup v2 only host: v1 files not checked")
	}
	for _, tc := range []struct {
		l                 Limits
		quota, mem, memsw string
		pids              string
	}{
		{Limits{CPUs: 0.5, MemoryBytes: 64 << 20, Pids: 16}, "50000", "67108864", "67108864", "16"},
		{Limits{CPUs: 1, MemoryBytes: 128 << 20, Pids: 32}, "100000", "134217728", "134217728", "32"},
		{Limits{CPUs: 0.25, MemoryBytes: 32 << 20}, "25000", "33554432", "33554432", "max"},
		{Limits{}, "-1", "9223372036854771712", "9223372036854771712", "max"},
	} {
		if err := ct.SetLimits(tc.l); err != nil {
			t.Fatalf("SetLimits(%+v): %v", tc.l, err)
		}
		for _, f := range []struct{ h, file, want string }{
			{"cpu", "cpu.cfs_quota_us", tc.quota},
			{"cpu", "cpu.cfs_period_us", "100000"},
			{"memory", "memory.limit_in_bytes", tc.mem},
			{"memory", "memory.memsw.limit_in_bytes", tc.memsw},
			{"pids", "pids.max", tc.pids},
		} {
			if got := readCgroup(t, ct, f.h, f.file); got != f.want {
				t.Errorf("after SetLimits(%+v): %s = %s, want %s", tc.l, f.file, got, f.want)
			}
		}
	}
	if err := ct.SetLimits(Limits{Pids: -1}); err == nil {
		t.Errorf("a negative limit was accepted")
	}
}

// Limits set on a prepared container hold for what Init starts: a fork
// bomb stops at the pids limit set after Prepare.
func TestSetLimitsBeforeStartEnforced(t *testing.T) {
	needRoot(t)
	r := testRuntime(t)
	ct := prepare(t, r, testConfig(t))
	if err := ct.SetLimits(Limits{Pids: 10}); err != nil {
		t.Fatal(err)
	}
	if err := ct.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	out, _ := execIn(t, r, ct, "sh", "-c", "i=0; while [ $i -lt 40 ]; do sleep 30 >/dev/null 2>&1 & i=$((i+1)); done; echo started")
	if !strings.Contains(out, "can't fork") && !strings.Contains(out, "Resource temporarily unavailable") {
		t.Fatalf("40 forks under a 10-pid limit did not fail: %q", out)
	}
}

func readComm(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + itoa(pid) + "/comm")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
