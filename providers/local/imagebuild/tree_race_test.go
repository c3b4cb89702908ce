package imagebuild

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Every way the builder writes into a sandbox's root, with a racing
// process that wins every race: the moment a name is made, before the
// builder gives it its owner, mode and times, the name becomes a symlink
// to a host file. The host file keeps its mode, owner, content and times:
// nothing after the creation follows the name.
//
// Checked against main at 6f9918d (its buildRoot.fifo with the same hook
// between mknodat and the attribute calls): the host file's mode became
// 0777; passes after.
func TestTreeRacedNames(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	if err := os.MkdirAll(filepath.Join(root, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(base, "victim")
	if err := os.WriteFile(victim, []byte("host"), 0o600); err != nil {
		t.Fatal(err)
	}
	tr, err := openTree(root)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	swaps := 0
	created = func(p string) {
		full := filepath.Join(root, p)
		if err := os.RemoveAll(full); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(victim, full); err != nil {
			t.Fatal(err)
		}
		swaps++
	}
	defer func() { created = nil }()
	o := owner{uid: 4242, gid: 4242, mode: 0o4777, hasMode: true}
	mtime := time.Unix(1e9, 0)
	for name, op := range map[string]func() error{
		"fifo":     func() error { return tr.fifo("/a/fifo", o) },
		"file":     func() error { return tr.file("/a/file", strings.NewReader("data"), o, mtime) },
		"dir":      func() error { return tr.dir("/a/dir", o, mtime) },
		"symlink":  func() error { return tr.symlink("/a/link", "target", o, mtime) },
		"mkdirAll": func() error { return tr.mkdirAll("/a/m/n", o) },
	} {
		before := swaps
		if err := op(); err != nil {
			t.Logf("%s: %v", name, err)
		}
		if swaps == before {
			t.Errorf("%s: the race hook never ran: this proves nothing", name)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(victim, &st); err != nil {
			t.Fatal(err)
		}
		if st.Mode&0o7777 != 0o600 || st.Uid == 4242 || time.Unix(st.Mtim.Unix()).Before(time.Now().Add(-time.Hour)) {
			t.Errorf("%s: the host file is now mode %#o, uid %d, mtime %v", name, st.Mode&0o7777, st.Uid, time.Unix(st.Mtim.Unix()))
		}
		if b, _ := os.ReadFile(victim); string(b) != "host" {
			t.Errorf("%s: the host file now holds %q", name, b)
		}
		os.Chmod(victim, 0o600)
	}
}
