package busyroot_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/internal/testing/busyroot"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

func busybox(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("making /dev nodes and chrooting need root")
	}
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("busybox not installed (apt-get install busybox-static)")
	}
	return bb
}

// A laid root runs busybox's shell chrooted (its applets run inside it even
// without a link), with links for the listed applets only,
// working /dev nodes, a sticky world-writable /tmp and the caller's files.
func TestLayRunsChrooted(t *testing.T) {
	bb := busybox(t)
	dir := t.TempDir()
	r := busyroot.Root{
		Busybox: bb,
		Applets: []string{"sh", "cat", "echo"},
		Dirs:    []string{"home/user"},
		Files:   map[string]string{"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n"},
	}
	if err := os.MkdirAll(filepath.Join(dir, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := r.Lay(dir); err != nil {
		t.Fatal(err)
	}
	// Laying again over what is there succeeds (callers make parts first).
	if err := r.Lay(dir); err != nil {
		t.Fatalf("second Lay: %v", err)
	}
	cmd := exec.Command("/bin/sh", "-c", "echo x > /dev/null && cat /etc/passwd && head -c 1 /dev/zero")
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: dir}
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/bin"}
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "root:x:0:0:root:/root:/bin/sh\n\x00" {
		t.Fatalf("chrooted run: %v, %q (want passwd, then a zero byte)", err, out)
	}
	if _, err := os.Lstat(filepath.Join(dir, "bin", "head")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("bin/head, not in Applets: %v", err)
	}
	var host, copied unix.Stat_t
	if err := unix.Stat(bb, &host); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(filepath.Join(dir, "bin", "busybox"), &copied); err != nil {
		t.Fatal(err)
	}
	if host.Ino == copied.Ino && host.Dev == copied.Dev {
		t.Fatal("bin/busybox is the host's file: a chrooted write would change it")
	}
	for _, d := range busyroot.Devices {
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join(dir, "dev", d.Name), &st); err != nil {
			t.Fatal(err)
		}
		if st.Mode != unix.S_IFCHR|0o666 || unix.Major(st.Rdev) != 1 || unix.Minor(st.Rdev) != d.Minor {
			t.Errorf("/dev/%s: mode %o rdev %d,%d", d.Name, st.Mode, unix.Major(st.Rdev), unix.Minor(st.Rdev))
		}
	}
	for name, mode := range map[string]os.FileMode{"tmp": os.ModeDir | os.ModeSticky | 0o777, "home/user": os.ModeDir | 0o755} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.Mode() != mode {
			t.Errorf("%s: %v, %v; want %v", name, fi.Mode(), err, mode)
		}
	}
}

// Applets nil links every applet busybox lists.
func TestLayAllApplets(t *testing.T) {
	bb := busybox(t)
	all, err := busyroot.List(bb)
	if err != nil || !slices.Contains(all, "sh") || !slices.Contains(all, "tar") {
		t.Fatalf("List = %d applets, %v", len(all), err)
	}
	dir := t.TempDir()
	if err := (busyroot.Root{Busybox: bb}).Lay(dir); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"sh", "tar", "sha256sum"} {
		if l, err := os.Readlink(filepath.Join(dir, "bin", a)); err != nil || l != "busybox" {
			t.Errorf("bin/%s -> %q, %v", a, l, err)
		}
	}
}

// Without a busybox, Lay makes the directories and files only.
func TestLayWithoutBusybox(t *testing.T) {
	dir := t.TempDir()
	if err := (busyroot.Root{Files: map[string]string{"hostname": "h\n"}}).Lay(dir); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "hostname")); err != nil || string(b) != "h\n" {
		t.Fatalf("hostname = %q, %v", b, err)
	}
	ents, err := os.ReadDir(filepath.Join(dir, "bin"))
	if err != nil || len(ents) != 0 {
		t.Fatalf("bin = %v, %v; want empty", ents, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "dev", "null")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("dev/null without busybox: %v", err)
	}
}

// A busybox path that is not one is InvalidArgument, whether it is missing
// or cannot list its applets.
func TestLayBadBusybox(t *testing.T) {
	for _, bb := range []string{filepath.Join(t.TempDir(), "missing"), "/bin/false"} {
		err := (busyroot.Root{Busybox: bb}).Lay(t.TempDir())
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("Lay with busybox %s: %v, want InvalidArgument", bb, err)
		}
	}
}
