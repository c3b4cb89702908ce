package dirfd_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/internal/dirfd"
)

// tree makes a root dir and, beside it, an outside dir holding a victim
// file (mode 0600) that no operation under the root may touch.
func tree(t *testing.T) (root, victim string) {
	t.Helper()
	base := t.TempDir()
	root = filepath.Join(base, "root")
	if err := os.MkdirAll(filepath.Join(root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	victim = filepath.Join(base, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	return root, victim
}

func assertVictim(t *testing.T, victim string) {
	t.Helper()
	fi, err := os.Stat(victim)
	if err != nil {
		t.Fatalf("victim: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("victim's mode changed to %v", fi.Mode())
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("victim's content changed to %q", b)
	}
	if fi.ModTime().Before(time.Now().Add(-time.Hour)) {
		t.Errorf("victim's mtime was set back to %v", fi.ModTime())
	}
}

func open(t *testing.T, dir string, m dirfd.Mode) *dirfd.Root {
	t.Helper()
	r, err := dirfd.Open(dir, m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// The calls that take a final name never follow it: a symlink to a file
// outside the root, sitting where a FIFO or file was expected, keeps the
// outside file's mode, owner and times.
func TestFinalNameNeverFollowed(t *testing.T) {
	root, victim := tree(t)
	if err := os.Symlink(victim, filepath.Join(root, "d", "fifo")); err != nil {
		t.Fatal(err)
	}
	r := open(t, root, dirfd.InRoot)
	d, name, err := r.Parent("/d/fifo")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Chmod(name, 0o777); err != nil {
		t.Errorf("chmod of a symlink: %v, want a no-op", err)
	}
	root0 := os.Geteuid() == 0 // chown needs root; the rest does not
	if err := d.SetAttrs(name, dirfd.Attrs{Chown: root0, UID: 1234, GID: 1234, SetMode: true, Mode: 0o4777, MTime: time.Unix(1e9, 0)}); err != nil {
		t.Errorf("set attrs of a symlink: %v", err)
	}
	assertVictim(t, victim)
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(root, "d", "fifo"), &st); err != nil || root0 && st.Uid != 1234 {
		t.Errorf("the link itself got uid %d (%v), want 1234", st.Uid, err)
	}
	if _, err := d.Open(name, unix.O_WRONLY); !errors.Is(err, unix.ELOOP) {
		t.Errorf("open of a symlink name: %v, want ELOOP", err)
	}
	if _, err := d.Create(name, 0o644); !errors.Is(err, fs.ErrExist) {
		t.Errorf("create over a symlink: %v, want EEXIST", err)
	}
	if err := d.Clear(name); err != nil {
		t.Fatal(err)
	}
	assertVictim(t, victim)
	if _, err := os.Lstat(filepath.Join(root, "d", "fifo")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Clear left %v", err)
	}
}

// InRoot resolves a sandbox's links as the sandbox sees them: an absolute
// link and a climbing one both land inside the root.
func TestInRootStaysInside(t *testing.T) {
	root, victim := tree(t)
	os.Symlink("/", filepath.Join(root, "abs"))
	os.Symlink("../../../..", filepath.Join(root, "d", "up"))
	os.Symlink(victim, filepath.Join(root, "v"))
	r := open(t, root, dirfd.InRoot)
	for _, p := range []string{"abs/d", "d/up/d", "/abs/abs/d"} {
		if !r.IsDir(p) {
			t.Errorf("%s does not resolve to the root's d", p)
		}
	}
	dd, err := r.MkdirAll("abs/d/up/made", 0o750)
	if err != nil {
		t.Fatal(err)
	}
	dd.Close()
	if fi, err := os.Stat(filepath.Join(root, "made")); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("MkdirAll through links made %v, %v; want <root>/made 0750", fi, err)
	}
	if _, err := r.ReadFile("v", 10); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("read through an absolute link to a host file: %v, want not found (inside the root)", err)
	}
	assertVictim(t, victim)
}

// Beneath refuses every link on the way, and the last element too.
func TestBeneathRefusesLinks(t *testing.T) {
	root, victim := tree(t)
	os.Symlink("d", filepath.Join(root, "ld"))
	os.Symlink(filepath.Dir(victim), filepath.Join(root, "out"))
	r := open(t, root, dirfd.Beneath)
	for _, p := range []string{"ld/x", "out/victim", "ld"} {
		if _, err := r.OpenDir(p); !errors.Is(err, unix.ELOOP) {
			t.Errorf("OpenDir(%s) = %v, want ELOOP", p, err)
		}
	}
	if _, err := r.MkdirAll("ld/new", 0o755); !errors.Is(err, unix.ELOOP) {
		t.Errorf("MkdirAll through a link: %v, want ELOOP", err)
	}
	if _, err := r.ReadFile("out/victim", 10); err == nil {
		t.Error("read through a link to the outside succeeded")
	}
	if d, name, err := r.Parent("../victim"); err != nil || d.Path() != "." || name != "victim" {
		// Clean keeps ".." at the root: the parent is the root itself.
		t.Errorf("Parent(../victim) = %v, %q, %v", d, name, err)
	} else {
		d.Close()
	}
	assertVictim(t, victim)
}

// RemoveAll removes links, never what they point at.
func TestRemoveAllKeepsTargets(t *testing.T) {
	root, victim := tree(t)
	os.MkdirAll(filepath.Join(root, "gone", "sub"), 0o755)
	os.Symlink(filepath.Dir(victim), filepath.Join(root, "gone", "sub", "outdir"))
	os.Symlink(victim, filepath.Join(root, "gone", "v"))
	os.WriteFile(filepath.Join(root, "gone", "f"), []byte("x"), 0o644)
	r := open(t, root, dirfd.Beneath)
	if err := r.RemoveAll("gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(root, "gone")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("gone is still there: %v", err)
	}
	assertVictim(t, victim)
}

// ReadFile bounds what it reads by the bytes read, and refuses a FIFO
// without blocking on it.
func TestReadFileBounded(t *testing.T) {
	root, _ := tree(t)
	os.WriteFile(filepath.Join(root, "big"), make([]byte, 100), 0o644)
	if err := unix.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := open(t, root, dirfd.InRoot)
	if _, err := r.ReadFile("big", 99); !errors.Is(err, dirfd.ErrTooLarge) {
		t.Errorf("read of 100 bytes with a limit of 99: %v", err)
	}
	if b, err := r.ReadFile("big", 100); err != nil || len(b) != 100 {
		t.Errorf("read at the limit: %d, %v", len(b), err)
	}
	done := make(chan error, 1)
	go func() { _, err := r.ReadFile("fifo", 10); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a FIFO read as a file")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ReadFile blocked on a FIFO")
	}
}

// The xattr calls read the name itself: a symlink to a file outside the
// root shows none of the file's attributes, and a directory held open
// keeps answering for its own entries after its name is swapped for a
// link to the outside.
func TestXattrsOfNameItself(t *testing.T) {
	root, victim := tree(t)
	if err := unix.Setxattr(victim, "user.secret", []byte("host"), 0); err != nil {
		t.Skipf("no user xattrs on this file system: %v", err)
	}
	if err := os.Symlink(victim, filepath.Join(root, "d", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "d", "own"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(filepath.Join(root, "d", "own"), "user.mine", []byte("in"), 0); err != nil {
		t.Fatal(err)
	}
	r := open(t, root, dirfd.Beneath)
	d, err := r.OpenDir("d")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if names, err := d.ListXattrs("link"); err != nil || len(names) != 0 {
		t.Errorf("xattrs of a symlink name: %v %v, want none of its target's", names, err)
	}
	if v, err := d.GetXattr("link", "user.secret"); err == nil {
		t.Errorf("read the target's xattr through a symlink name: %q", v)
	}
	// Swap d for a link to the victim's directory: the open d still names
	// the tree's directory.
	if err := os.Rename(filepath.Join(root, "d"), filepath.Join(root, "d.real")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(victim), filepath.Join(root, "d")); err != nil {
		t.Fatal(err)
	}
	names, err := d.Names()
	if err != nil || len(names) != 2 {
		t.Fatalf("names of the held directory: %v %v, want link and own", names, err)
	}
	if v, err := d.GetXattr("own", "user.mine"); err != nil || string(v) != "in" {
		t.Errorf("xattr of the held directory's entry: %q %v", v, err)
	}
	if _, err := d.ListXattrs("../victim"); !errors.Is(err, unix.EINVAL) {
		t.Errorf("a name with a slash: %v, want EINVAL", err)
	}
}
