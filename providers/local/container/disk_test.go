package container

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

const testDisk = 32 << 20

func needDiskTools(t testing.TB) {
	t.Helper()
	needRoot(t)
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skipf("no loop devices: %v", err)
	}
	if _, err := lookMkfs(); err != nil {
		t.Skipf("no mkfs.ext4 (apt-get install e2fsprogs): %v", err)
	}
}

// assertDiskBounded checks the sandbox's disk on the host: an image of
// exactly the limit whose blocks on the host's disk stay within it.
func assertDiskBounded(t *testing.T, ct *Container) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(ct.path(diskImage), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != testDisk || st.Blocks*512 > testDisk {
		t.Errorf("disk image: size %d, %d bytes on the host's disk; want %d and at most that", st.Size, st.Blocks*512, testDisk)
	}
	if !strings.HasPrefix(ct.UpperDir(), ct.path(diskDir)+"/") {
		t.Errorf("upper dir %s is not on the disk %s", ct.UpperDir(), ct.path(diskDir))
	}
}

// assertNoLoop fails if a loop device still has a file under dir behind
// it. Clearing a device after its last unmount may finish a moment later.
func assertNoLoop(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(LoopDevicesOf(dir)) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if left := LoopDevicesOf(dir); len(left) > 0 {
		t.Errorf("loop devices still attached after delete: %v", left)
	}
}

// A container with a disk limit that writes past it gets ENOSPC; the
// host's disk holds at most the limit for it, and Delete leaves no mount
// and no loop device.
func TestDiskLimit(t *testing.T) {
	needDiskTools(t)
	r := testRuntime(t)
	c := testConfig(t)
	c.DiskBytes = testDisk
	ct := create(t, r, c)
	out, code := execIn(t, r, ct, "sh", "-c", "dd if=/dev/zero of=/big bs=1M count=64")
	if code == 0 || !strings.Contains(out, "No space left on device") {
		t.Fatalf("64 MiB written under a 32 MiB limit: exit %d %q", code, out)
	}
	assertDiskBounded(t, ct)
	if fi, err := os.Stat(filepath.Join(ct.UpperDir(), "big")); err != nil || fi.Size() < 16<<20 {
		t.Fatalf("the write did not land in the upper dir up to the limit: %v %v", fi, err)
	}
	// Deleting frees space, as on any disk.
	if out, code := execIn(t, r, ct, "sh", "-c", "rm /big && dd if=/dev/zero of=/again bs=1M count=8"); code != 0 {
		t.Fatalf("write after freeing space: exit %d %q", code, out)
	}
	deleteGone(t, r, ct)
	assertNoLoop(t, c.Dir)
}

// The /etc files berth writes (writable bind mounts, as Docker's) live on
// the container's disk: appending to them past the limit gets ENOSPC, under
// every runtime, cold and after SwitchRoot. On 5553f78 they were files in
// Config.Dir on the host's file system, and each append of 64 MiB below
// succeeded under a 32 MiB limit.
func TestDiskLimitEtc(t *testing.T) {
	needDiskTools(t)
	t.Run("cold", func(t *testing.T) { eachRuntime(t, []string{"runc", "crun", "runsc"}, etcOnDiskCold) })
	t.Run("switched", func(t *testing.T) { eachRuntime(t, []string{"runc", "crun"}, etcOnDiskSwitched) })
}

func etcOnDiskCold(t *testing.T, r Runtime) {
	c := testConfig(t)
	c.DiskBytes = testDisk
	ct := create(t, r, c)
	for _, f := range etcFiles {
		out, code := execIn(t, r, ct, "sh", "-c", "dd if=/dev/zero bs=1M count=64 2>&1 >> /etc/"+f)
		if code == 0 || !strings.Contains(out, "No space left on device") {
			t.Errorf("64 MiB appended to /etc/%s under a 32 MiB limit: exit %d %q", f, code, out)
		}
	}
	assertEtcOnDisk(t, ct)
	deleteGone(t, r, ct)
	assertNoLoop(t, c.Dir)
}

func etcOnDiskSwitched(t *testing.T, r Runtime) {
	c, sock := blankConfig(t)
	c.DiskBytes = testDisk
	ct := create(t, r, c)
	if err := ct.SwitchRoot([]string{busyboxRootfs(t)}); err != nil {
		t.Fatal(err)
	}
	for _, f := range etcFiles {
		if got := sh(t, sock, "dd if=/dev/zero bs=1M count=64 2>&1 >> /etc/"+f); !strings.Contains(got, "No space left on device") {
			t.Errorf("64 MiB appended to /etc/%s under a 32 MiB limit after the switch: %q", f, got)
		}
	}
	assertEtcOnDisk(t, ct)
	deleteGone(t, r, ct)
	assertNoLoop(t, c.Dir)
}

// assertEtcOnDisk checks that the container's /etc files are on its disk
// and its disk image within the limit.
func assertEtcOnDisk(t *testing.T, ct *Container) {
	t.Helper()
	assertDiskBounded(t, ct)
	var disk unix.Stat_t
	if err := unix.Stat(ct.path(diskDir), &disk); err != nil {
		t.Fatal(err)
	}
	for _, f := range etcFiles {
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join(ct.rw(etcDir), f), &st); err != nil || st.Dev != disk.Dev {
			t.Errorf("/etc/%s is not on the container's disk (%v)", f, err)
		}
	}
	if _, err := os.Lstat(ct.path(etcDir)); !os.IsNotExist(err) {
		t.Errorf("an etc directory on the host's file system: %v", err)
	}
}

// A blank container made with a disk limit gives SwitchRoot's root the
// disk: the pool's sandboxes pay for the disk at start, not at claim.
func TestDiskLimitSwitchRoot(t *testing.T) {
	needDiskTools(t)
	r := testRuntime(t)
	c, sock := blankConfig(t)
	c.DiskBytes = testDisk
	ct := create(t, r, c)
	if err := ct.SwitchRoot([]string{busyboxRootfs(t)}); err != nil {
		t.Fatal(err)
	}
	got := sh(t, sock, "dd if=/dev/zero of=/big bs=1M count=64 2>&1; echo; df -k / | tail -n 1")
	if !strings.Contains(got, "No space left on device") {
		t.Fatalf("64 MiB written under a 32 MiB limit after the switch: %q", got)
	}
	assertDiskBounded(t, ct)
	deleteGone(t, r, ct)
	assertNoLoop(t, c.Dir)
}

// What a creator that died leaves of a disk (its mount; the loop device
// clears itself) goes with Load and Delete from another process, and with
// RemoveDir where no state was saved.
func TestDiskLeftoversRemoved(t *testing.T) {
	needDiskTools(t)
	r := testRuntime(t)
	c := testConfig(t)
	c.DiskBytes = testDisk
	ct := create(t, r, c)
	loaded, err := r.Load(t.Context(), ct.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if loaded.UpperDir() != ct.UpperDir() {
		t.Errorf("loaded upper dir %s, want %s", loaded.UpperDir(), ct.UpperDir())
	}
	deleteGone(t, r, loaded)
	assertNoLoop(t, c.Dir)

	// A half-made one: the disk mounted, no container.
	dir := filepath.Join(t.TempDir(), "half")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := makeDisk(t.Context(), filepath.Join(dir, diskImage), filepath.Join(dir, diskDir), testDisk); err != nil {
		t.Fatal(err)
	}
	if len(LoopDevicesOf(dir)) != 1 {
		t.Fatalf("the disk has no loop device: the test proves nothing")
	}
	if err := RemoveDir(dir); err != nil {
		t.Fatal(err)
	}
	assertNoDir(t, dir)
	assertNoLoop(t, dir)
}

func TestDiskLimitRefusals(t *testing.T) {
	needRoot(t)
	r := testRuntime(t)
	for _, n := range []int64{-1, 1 << 20} {
		c := testConfig(t)
		c.DiskBytes = n
		if _, err := r.Create(t.Context(), c); errdefs.ClassOf(err) != errdefs.InvalidArgument {
			t.Errorf("disk limit %d: %v, want InvalidArgument", n, err)
		}
		assertNoDir(t, c.Dir)
	}
	mkfsBinary = "mkfs.ext4-missing"
	defer func() { mkfsBinary = "mkfs.ext4" }()
	c := testConfig(t)
	c.DiskBytes = testDisk
	if _, err := r.Create(t.Context(), c); errdefs.ClassOf(err) != errdefs.NotSupported || !strings.Contains(err.Error(), "e2fsprogs") {
		t.Errorf("no mkfs.ext4: %v, want NotSupported naming e2fsprogs", err)
	}
	assertNoDir(t, c.Dir)
}

// BenchmarkMakeDisk times what a disk limit adds to a cold Create: the
// sparse file, mkfs.ext4 and the loop mount (and, untimed, the unmount).
// Run: go test ./container -run '^$' -bench MakeDisk -benchtime 20x
func BenchmarkMakeDisk(b *testing.B) {
	needDiskTools(b)
	for _, size := range []int64{4 << 30, 10 << 30} {
		b.Run(strconv.FormatInt(size>>30, 10)+"GiB", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				dir := filepath.Join(b.TempDir(), "d")
				if err := os.Mkdir(dir, 0o700); err != nil {
					b.Fatal(err)
				}
				if err := makeDisk(context.Background(), filepath.Join(dir, diskImage), filepath.Join(dir, diskDir), size); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := RemoveDir(dir); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
