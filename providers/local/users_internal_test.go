package local

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/internal/passwd"
	"github.com/berth-sh/berth/providers/local/container"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// layer writes files into a new layer directory.
func layer(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const testPasswd = "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1001:app:/home/app:/bin/sh\n"
const testGroup = "root:x:0:\napp:x:1001:\nstaff:x:50:\n"

func TestResolveUser(t *testing.T) {
	layers := []string{layer(t, map[string]string{"etc/passwd": testPasswd, "etc/group": testGroup})}
	for _, tt := range []struct {
		spec string
		want identity
	}{
		{"", identity{}},
		{"root", identity{}},
		{"0", identity{}},
		// Known users: the agent stays root and switches per command.
		{"app", identity{user: "app"}},
		{"1000", identity{user: "app"}},
		{"app:1001", identity{user: "app"}},
		{"app:app", identity{user: "app"}},
		// Another group, or an id without an entry: the agent runs as it.
		{"app:staff", identity{agent: container.User{UID: 1000, GID: 50}}},
		{"1000:50", identity{agent: container.User{UID: 1000, GID: 50}}},
		{"4242", identity{agent: container.User{UID: 4242, GID: 0}}},
		{"4242:4242", identity{agent: container.User{UID: 4242, GID: 4242}}},
	} {
		got, err := resolveUser(tt.spec, layers)
		if err != nil || got.user != tt.want.user || got.agent.UID != tt.want.agent.UID || got.agent.GID != tt.want.agent.GID {
			t.Errorf("resolveUser(%q) = %+v, %v; want %+v", tt.spec, got, err, tt.want)
		}
	}
	for _, bad := range []string{"alice", "app:nogroup", ":1", "1:", "a/b"} {
		if _, err := resolveUser(bad, layers); errdefs.ClassOf(err) != errdefs.InvalidArgument {
			t.Errorf("resolveUser(%q): %v, want InvalidArgument", bad, err)
		}
	}
}

// The top layer's /etc/passwd wins; a whiteout hides the lower one.
func TestImageFileLayering(t *testing.T) {
	low := layer(t, map[string]string{"etc/passwd": testPasswd})
	high := layer(t, map[string]string{"etc/passwd": "root:x:0:0::/root:/bin/sh\nbob:x:7:7::/:/bin/sh\n"})
	if got, err := resolveUser("bob", []string{low, high}); err != nil || got.user != "bob" {
		t.Errorf("user from the top layer: %+v, %v", got, err)
	}
	if _, err := resolveUser("app", []string{low, high}); err == nil {
		t.Error("the top layer's passwd replaces the lower one's, but app resolved")
	}
	// A symlink in a layer does not lead out of it.
	esc := t.TempDir()
	os.MkdirAll(filepath.Join(esc, "etc"), 0o755)
	os.Symlink("/etc/passwd", filepath.Join(esc, "etc/passwd"))
	if got := passwd.ReadLayered([]string{esc}, "etc/passwd"); len(got) != 0 {
		t.Errorf("read the host's /etc/passwd through a symlink in a layer: %q", got)
	}
	if os.Geteuid() != 0 {
		t.Skip("making a whiteout (a 0:0 character device) needs root")
	}
	wh := t.TempDir()
	os.MkdirAll(filepath.Join(wh, "etc"), 0o755)
	if err := unix.Mknod(filepath.Join(wh, "etc/passwd"), unix.S_IFCHR|0o644, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := resolveUser("app", []string{low, wh}); err == nil {
		t.Error("a whiteout hides the lower passwd, but app resolved")
	}
}
