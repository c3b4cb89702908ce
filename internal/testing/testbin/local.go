package testbin

import (
	"os"
	"os/exec"
	"testing"
)

// LocalMissing says why runc containers, and so the local provider, cannot
// run here, or "" when they can: they need root (namespaces, overlayfs,
// cgroups) and a runc in PATH.
func LocalMissing() string {
	if os.Geteuid() != 0 {
		return "needs root: the local provider's runc containers need namespaces, overlayfs and cgroups"
	}
	if _, err := exec.LookPath("runc"); err != nil {
		return "needs runc: apt-get install runc"
	}
	return ""
}

// NeedLocal skips t, with the reason, unless LocalMissing is "".
func NeedLocal(t testing.TB) {
	t.Helper()
	if why := LocalMissing(); why != "" {
		t.Skip(why)
	}
}
