package local_test

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/providers/local/container"
	"github.com/berth-sh/berth/sandbox"
)

// crashHelperEnv, with poolHelperEnv, makes the pool helper create a
// sandbox of helperTTL first (see poolHelperMain).
const crashHelperEnv = "BERTH_LOCAL_TEST_CRASH_HELPER"

// A berth process with a sandbox and a pool is killed with SIGKILL. Its
// sandbox ends at its TTL and its pool's sandboxes at once, with nobody
// running anything; and what they leave (mounts, cgroups, runtime state,
// directories) is removed by the next process that opens the provider on
// the same state directory, in New, with no Reap. Each has a disk limit:
// its disk's mount goes too, and no loop device stays attached.
//
// Checked against main at 6f9918d: the processes ended on time, but New
// removed nothing (every mount, cgroup and runtime state was still there
// until a Reap); passes after.
func TestCrashLeftoversCleanedOnOpen(t *testing.T) {
	needRoot(t)
	newDriver(t) // this process reaps the orphaned inits (subreaper)
	cmd, ids := startHelper(t, 3, poolHelperEnv+"=1", crashHelperEnv+"=1")
	created := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	for _, id := range ids {
		for len(procsIn(id)) > 0 {
			if time.Since(created) > helperTTL+10*time.Second {
				t.Fatalf("sandbox %s still has processes %v long after its TTL", id, procsIn(id))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if time.Since(created) < helperTTL-500*time.Millisecond {
		t.Fatalf("the sandbox ended after %v, before its TTL", time.Since(created))
	}
	for _, id := range ids {
		if dir := filepath.Join(stateDir, "sandboxes", id); len(mountsUnder(dir)) == 0 || len(container.LoopDevicesOf(dir)) == 0 {
			t.Fatalf("%s left no mount or no disk: the test proves nothing", id)
		}
	}
	p, err := local.New(options())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, id := range ids {
		assertNoLeftovers(t, id)
	}
}

// The host side of every sandbox's root is mounted nosuid and nodev: a
// set-id binary or a device node the sandbox made in its upper layer gives
// no host process its powers. Inside, the root keeps the flags.
//
// Checked against main at 6f9918d: the overlays were mounted with neither
// flag; passes after.
func TestAttackHostSideSetID(t *testing.T) {
	p := openProvider(t)
	sb := create(t, p, sandbox.Spec{})
	sh(t, sb, "cp /bin/busybox /suid-sh && chmod 4755 /suid-sh")
	mounts := mountsUnder(filepath.Join(stateDir, "sandboxes", sb.ID()))
	if len(mounts) == 0 {
		t.Fatal("no mount found for the sandbox")
	}
	for _, m := range mounts {
		m = strings.TrimPrefix(m, "mount ")
		var st unix.Statfs_t
		if err := unix.Statfs(m, &st); err != nil {
			t.Fatal(err)
		}
		if st.Flags&unix.ST_NOSUID == 0 || st.Flags&unix.ST_NODEV == 0 {
			t.Errorf("%s is mounted without nosuid or nodev (flags %#x)", m, st.Flags)
		}
	}
	if got := sh(t, sb, "awk '$2 == \"/\" { print $4 }' /proc/mounts"); !strings.Contains(got, "nosuid") || !strings.Contains(got, "nodev") {
		t.Errorf("the sandbox's root has options %q, want nosuid and nodev", got)
	}
}
