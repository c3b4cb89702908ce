package localtest_test

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/internal/testing/localtest"
	"github.com/berth-sh/berth/providers/local"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting and making cgroups need root")
	}
}

// A stray sandbox dir is reported and its state dir removed; a state dir
// with a mount under it is reported and kept, so that removing it never
// walks into what is mounted there; a state dir already gone is skipped.
func TestSweepStateDirs(t *testing.T) {
	needRoot(t)
	clean, mounted := t.TempDir(), t.TempDir()
	stray := filepath.Join(clean, "sandboxes", "sb-stray")
	if err := os.MkdirAll(stray, 0o755); err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(mounted, "rootfs")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	keep := filepath.Join(mnt, "precious")
	if err := os.WriteFile(keep, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := localtest.MountsUnder(mounted); !slices.Equal(got, []string{"mount " + mnt}) {
		t.Fatalf("MountsUnder(%s) = %v", mounted, got)
	}

	left := localtest.Sweep(local.Options{}, clean, mounted, filepath.Join(clean, "gone"))
	want := []string{"sandbox dir " + stray, "mount " + mnt}
	if !slices.Equal(left, want) {
		t.Fatalf("Sweep = %v, want %v", left, want)
	}
	if _, err := os.Stat(clean); !os.IsNotExist(err) {
		t.Errorf("state dir with nothing mounted is still there: %v", err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("Sweep removed a file on a mount under a state dir: %v", err)
	}
}

// A cgroup left under the parent is reported, and the parent removed once
// it is empty.
func TestSweepCgroups(t *testing.T) {
	needRoot(t)
	// cgroup v2 at /sys/fs/cgroup, or a v1 hierarchy under it.
	hier := ""
	for _, h := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/cpu"} {
		if _, err := os.Stat(filepath.Join(h, "cgroup.procs")); err == nil {
			hier = h
			break
		}
	}
	if hier == "" {
		t.Skip("no cgroup hierarchy found under /sys/fs/cgroup")
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	parent := "berth-localtest-" + hex.EncodeToString(b)
	child := filepath.Join(hier, parent, "sb-left")
	if err := os.MkdirAll(child, 0o755); err != nil {
		t.Skip("cannot make a cgroup here:", err)
	}
	t.Cleanup(func() { os.Remove(child); os.Remove(filepath.Dir(child)) })
	if got := localtest.CgroupDirs(parent); !slices.Equal(got, []string{filepath.Dir(child)}) {
		t.Fatalf("CgroupDirs(%s) = %v", parent, got)
	}
	if left := localtest.Sweep(local.Options{CgroupParent: parent}); !slices.Equal(left, []string{"cgroup " + child}) {
		t.Fatalf("Sweep = %v, want the child cgroup", left)
	}
	if err := os.Remove(child); err != nil {
		t.Fatal(err)
	}
	if left := localtest.Sweep(local.Options{CgroupParent: parent}); len(left) != 0 {
		t.Fatalf("Sweep of an empty parent = %v", left)
	}
	if got := localtest.CgroupDirs(parent); len(got) != 0 {
		t.Fatalf("parent cgroup still there after Sweep: %v", got)
	}
}
