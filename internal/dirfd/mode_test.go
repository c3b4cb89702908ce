package dirfd_test

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/internal/dirfd"
)

// TestUnixMode checks the chmod(2) numbering against the kernel's: a file
// given each mode by chmod(2) reads back, through Go's FileMode, as the
// same number.
func TestUnixMode(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, want := range []uint32{0o644, 0o755, 0o4755, 0o2750, 0o1777, 0o7000} {
		if err := unix.Chmod(p, want); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := dirfd.UnixMode(fi.Mode()); got != want {
			t.Errorf("mode %o reads back as %o", want, got)
		}
	}
}
