package container

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// blankConfig is agentConfig on a blank root, with a read-only bind mount
// of a host directory at /data.
func blankConfig(t testing.TB) (Config, string) {
	t.Helper()
	c, sock := agentConfig(t)
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "f"), []byte("from the host"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.Mounts = []Mount{{Source: data, Target: "/data", ReadOnly: true}}
	blank, err := MakeBlankRoot(filepath.Join(fixtureDir, "blank"), &c)
	if err != nil {
		t.Fatal(err)
	}
	c.LowerDirs = []string{blank}
	c.Blank = true
	return c, sock
}

func sh(t *testing.T, sock, script string) string {
	t.Helper()
	return agentGet(t, sock, "/exec?"+url.Values{"arg": {"/bin/sh", "-c", script}}.Encode())
}

func TestSwitchRoot(t *testing.T) {
	needRoot(t)
	r := testRuntime(t)
	c, sock := blankConfig(t)
	ct := create(t, r, c)
	if _, err := agentGetErr(sock, "/exec?arg=/bin/sh&arg=-c&arg=true"); err == nil {
		t.Fatal("the blank root runs /bin/sh")
	}
	// Every mount point is in the blank root: the runtime wrote nothing
	// into the upper directory, and teardown has nothing there to remove.
	if ents, err := os.ReadDir(filepath.Join(ct.Dir(), upperDir)); err != nil || len(ents) != 0 {
		t.Fatalf("upper dir of a blank container: %v %v, want empty", ents, err)
	}
	if again, err := MakeBlankRoot(filepath.Dir(c.LowerDirs[0]), &c); err != nil || again != c.LowerDirs[0] {
		t.Fatalf("MakeBlankRoot again = %q %v, want %q", again, err, c.LowerDirs[0])
	}
	lower := busyboxRootfs(t)
	if err := ct.SwitchRoot([]string{lower}); err != nil {
		t.Fatal(err)
	}
	// The init carries on in the image's root, with everything Create
	// would have given it there.
	got := sh(t, sock, `cat /etc/hostname /data/f; echo; tr '\0' ' ' < /proc/1/cmdline; echo
		test -c /dev/null && test -c /dev/urandom && test -d /dev/pts && test -d /dev/shm && echo dev ok
		test -s /proc/kcore || echo kcore masked
		touch /proc/sys/x 2>/dev/null || echo proc/sys read-only
		touch /sys/x 2>/dev/null || echo sys read-only
		touch /data/x 2>/dev/null || echo data read-only
		test -e `+SwitchPoint+` || echo no switch point
		test -x /bin/busybox && echo image ok
		echo written > /w`)
	want := "exit=0\n" + c.ID + "\nfrom the host\n/.berth/agent \ndev ok\nkcore masked\nproc/sys read-only\nsys read-only\ndata read-only\nno switch point\nimage ok\n"
	if got != want {
		t.Fatalf("after the switch:\n%s\nwant:\n%s", got, want)
	}
	if b, err := os.ReadFile(filepath.Join(ct.UpperDir(), "w")); err != nil || string(b) != "written\n" {
		t.Fatalf("the sandbox's write is not in its upper dir: %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(ct.Rootfs(), "w")); err != nil || string(b) != "written\n" {
		t.Fatalf("Rootfs does not show the new root: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(lower, "w")); !os.IsNotExist(err) {
		t.Fatalf("the write reached the image's layer (%v)", err)
	}
	// The container's mounts moved in its namespace only: the host has the
	// two overlays and nothing under them.
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var mine []string
	for _, line := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], ct.Dir()) {
			mine = append(mine, strings.TrimPrefix(f[4], ct.Dir()))
		}
	}
	if strings.Join(mine, " ") != "/rootfs /root" {
		t.Fatalf("host mounts under the container dir: %q, want the two overlays", mine)
	}
	if err := ct.SwitchRoot([]string{lower}); err == nil {
		t.Fatal("a second switch succeeded")
	}
	deleteGone(t, r, ct)
}

// An image whose directories are symlinks to host paths gets its mount
// points inside itself, as with the runtime's own mounts.
func TestSwitchRootSymlinksStayInside(t *testing.T) {
	needRoot(t)
	r := testRuntime(t)
	c, sock := blankConfig(t)
	ct := create(t, r, c)
	host := t.TempDir()
	evil := t.TempDir()
	for _, l := range []struct{ name, to string }{
		{"etc", host},                // absolute, to a host directory
		{"data", "../../../" + host}, // relative, climbing out
	} {
		if err := os.Symlink(l.to, filepath.Join(evil, l.name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := ct.SwitchRoot([]string{evil, busyboxRootfs(t)}); err != nil {
		t.Fatal(err)
	}
	if ents, err := os.ReadDir(host); err != nil || len(ents) > 0 {
		t.Fatalf("the switch wrote into the host directory the image points at: %v %v", ents, err)
	}
	if got := sh(t, sock, "cat /etc/hostname /data/f"); got != "exit=0\n"+c.ID+"\nfrom the host" {
		t.Fatalf("mounts behind the image's symlinks: %q", got)
	}
}

func TestSwitchRootRefusals(t *testing.T) {
	needRoot(t)
	r := testRuntime(t)
	c, _ := blankConfig(t)
	ct := create(t, r, c)
	for _, lowers := range [][]string{nil, {"relative"}, {"/no/such/dir"}, {t.TempDir() + ":x"}} {
		if err := ct.SwitchRoot(lowers); err == nil {
			t.Errorf("SwitchRoot(%q) succeeded", lowers)
		}
	}
	if mounts := mountsAt(t, filepath.Join(ct.Dir(), rootDir)); mounts != 0 {
		t.Errorf("a refused switch left %d mounts", mounts)
	}
	// Only a container made blank switches, and only a blank root makes one.
	plain, _ := agentConfig(t)
	if err := create(t, r, plain).SwitchRoot([]string{busyboxRootfs(t)}); errdefs.ClassOf(err) != errdefs.InvalidArgument {
		t.Errorf("switch of a container not made blank: %v", err)
	}
	plain, _ = agentConfig(t)
	plain.Blank = true
	if _, err := r.Create(context.Background(), plain); errdefs.ClassOf(err) != errdefs.InvalidArgument {
		t.Errorf("a blank container on an image: %v", err)
	}
}

// mountsAt counts the host's mounts on p.
func mountsAt(t *testing.T, p string) int {
	t.Helper()
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == p {
			n++
		}
	}
	return n
}

// The main thread, when the scheduler runs inMountNS's goroutine there,
// must not be the one that enters: it would stay there for good, and
// /proc/self (the process's view of mounts and root) with it.
func TestInMountNSLeavesMainThread(t *testing.T) {
	needRoot(t)
	r := testRuntime(t)
	ct := create(t, r, testConfig(t))
	ns, err := unix.Open(fmt.Sprintf("/proc/%d/ns/mnt", ct.Pid()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ns)
	for range 300 {
		if err := inMountNS(ns, func() error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if root, err := os.Readlink("/proc/self/root"); err != nil || root != "/" {
		t.Fatalf("the process's root is %q (%v)", root, err)
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil || !strings.Contains(string(mi), ct.Rootfs()) {
		t.Fatalf("the process's mounts are no longer the host's: %v", err)
	}
}
