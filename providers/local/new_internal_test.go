package local

import (
	"strings"
	"testing"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Without root the provider says what it needs, in one sentence.
func TestNewNeedsRoot(t *testing.T) {
	defer func(f func() int) { geteuid = f }(geteuid)
	geteuid = func() int { return 1000 }
	_, err := New(Options{StateDir: t.TempDir()})
	if errdefs.ClassOf(err) != errdefs.Unauthenticated || !strings.Contains(err.Error(), "the local provider needs root (runc, overlayfs, cgroups); run as root") {
		t.Errorf("New as non-root: %v", err)
	}
}

// A missing runtime is named with the package that provides it; a state
// dir too deep for socket paths and a cgroup parent that climbs are
// refused before anything is made.
func TestNewRefusals(t *testing.T) {
	if geteuid() != 0 {
		t.Skip("past the root check only as root")
	}
	_, err := New(Options{StateDir: t.TempDir(), Runtime: "/nonexistent/runc"})
	if errdefs.ClassOf(err) != errdefs.NotSupported || !strings.Contains(err.Error(), "apt-get install runc") {
		t.Errorf("missing runtime: %v", err)
	}
	deep := "/tmp/" + strings.Repeat("d", 80)
	_, err = New(Options{StateDir: deep})
	if errdefs.ClassOf(err) != errdefs.InvalidArgument || !strings.Contains(err.Error(), "too long") {
		t.Errorf("deep state dir: %v", err)
	}
	for _, cp := range []string{"/abs", "../up", "a/../../b"} {
		if _, err := New(Options{StateDir: t.TempDir(), CgroupParent: cp}); errdefs.ClassOf(err) != errdefs.InvalidArgument {
			t.Errorf("cgroup parent %q: %v", cp, err)
		}
	}
	if _, err := New(Options{StateDir: "relative/dir"}); errdefs.ClassOf(err) != errdefs.InvalidArgument {
		t.Errorf("relative state dir: %v", err)
	}
}
