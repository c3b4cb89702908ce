package container

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readCgroup(t *testing.T, ct *Container, hierarchy, file string) string {
	t.Helper()
	dir, ok := ct.CgroupPaths()[hierarchy]
	if !ok {
		t.Fatalf("no %s cgroup in %v", hierarchy, ct.CgroupPaths())
	}
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestLimitsApplied(t *testing.T) {
	needRoot(t)
	r := testRuntime(t)
	c := testConfig(t)
	c.Limits = Limits{CPUs: 0.5, MemoryBytes: 64 << 20, Pids: 16}
	ct := create(t, r, c)

	for _, tc := range []struct{ hierarchy, file, want string }{
		{"cpu", "cpu.cfs_quota_us", "50000"},
		{"cpu", "cpu.cfs_period_us", "100000"},
		{"memory", "memory.limit_in_bytes", "67108864"},
		{"memory", "memory.memsw.limit_in_bytes", "67108864"}, // no swap
		{"pids", "pids.max", "16"},
	} {
		if _, ok := ct.CgroupPaths()[tc.hierarchy]; !ok {
			if _, ok := ct.CgroupPaths()["unified"]; ok {
				t.Skipf("cgroup v2 only host: v1 files not checked")
			}
		}
		if got := readCgroup(t, ct, tc.hierarchy, tc.file); got != tc.want {
			t.Errorf("%s/%s = %s, want %s", tc.hierarchy, tc.file, got, tc.want)
		}
	}
	// The init is in those cgroups.
	if procs := readCgroup(t, ct, "pids", "cgroup.procs"); !strings.Contains("\n"+procs+"\n", "\n"+itoa(ct.Pid())+"\n") {
		t.Errorf("init %d not in its pids cgroup: %q", ct.Pid(), procs)
	}
}

func TestPidsLimitStopsForkBomb(t *testing.T) {
	needRoot(t)
	r := testRuntime(t)
	c := testConfig(t)
	c.Limits.Pids = 10
	ct := create(t, r, c)
	// Forty background sleeps cannot fit in ten pids.
	out, _ := execIn(t, r, ct, "sh", "-c", "i=0; while [ $i -lt 40 ]; do sleep 30 >/dev/null 2>&1 & i=$((i+1)); done; echo started")
	if !strings.Contains(out, "can't fork") && !strings.Contains(out, "Resource temporarily unavailable") {
		t.Fatalf("40 forks under a 10-pid limit did not fail: %q", out)
	}
	if cur := readCgroup(t, ct, "pids", "pids.current"); atoi(t, cur) > 10 {
		t.Fatalf("pids.current %s over the limit", cur)
	}
}

func TestMemoryHogKilled(t *testing.T) {
	needRoot(t)
	r := testRuntime(t)
	c := testConfig(t)
	c.Limits.MemoryBytes = 32 << 20
	ct := create(t, r, c)
	// tail buffers a line that never ends: it grows until the OOM killer
	// stops it at the limit. The hog takes the highest score first, as
	// berth's agent gives every command: when a second OOM comes before the
	// first victim's pages are freed, the killer takes another command, not
	// the init.
	out, code := execIn(t, r, ct, "sh", "-c", "echo 1000 >/proc/self/oom_score_adj && head -c 512m /dev/zero | tail -n 1 >/dev/null")
	if code != 137 {
		t.Fatalf("memory hog exit %d (%q), want 137 (SIGKILL by the OOM killer)", code, out)
	}
	// The killer may take more than one victim (head as well as tail when
	// the two race for the last pages): any count above zero is the kill.
	if oom := readCgroup(t, ct, "memory", "memory.oom_control"); oomKills(t, oom) < 1 {
		t.Fatalf("no OOM kill in the container's cgroup: %q", oom)
	}
	// The container's init survived: only the hog was killed.
	if _, err := procStartTime(ct.Pid()); err != nil {
		t.Fatalf("init died with the hog: %v", err)
	}
}

// oomKills reads the oom_kill count of a v1 memory.oom_control file.
func oomKills(t *testing.T, oomControl string) int {
	t.Helper()
	for _, line := range strings.Split(oomControl, "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			return atoi(t, v)
		}
	}
	t.Fatalf("no oom_kill line in memory.oom_control: %q", oomControl)
	return 0
}
