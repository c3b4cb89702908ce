package testbin_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/berth-sh/berth/internal/testing/testbin"
)

// LocalMissing names what is missing: runc when PATH has none, nothing on
// a root host with runc.
func TestLocalMissing(t *testing.T) {
	if os.Geteuid() != 0 {
		if why := testbin.LocalMissing(); !strings.Contains(why, "root") {
			t.Fatalf("LocalMissing as uid %d = %q, want it to name root", os.Geteuid(), why)
		}
		return
	}
	if _, err := exec.LookPath("runc"); err == nil {
		if why := testbin.LocalMissing(); why != "" {
			t.Fatalf("LocalMissing as root with runc = %q", why)
		}
	}
	t.Setenv("PATH", t.TempDir())
	if why := testbin.LocalMissing(); !strings.Contains(why, "runc") {
		t.Fatalf("LocalMissing without runc in PATH = %q, want it to name runc", why)
	}
}
