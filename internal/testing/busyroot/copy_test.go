package busyroot_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/berth-sh/berth/internal/testing/busyroot"
)

// TestCopy: directories, files and symlinks arrive with their modes; a
// file in the destination that is a hard link of another is replaced, not
// written through; a FIFO is left out.
func TestCopy(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(src, "a/b"), 0o750))
	must(os.WriteFile(filepath.Join(src, "a/b/f"), []byte("new"), 0o640))
	must(os.Chmod(filepath.Join(src, "a/b/f"), 0o640))
	must(os.Symlink("b/f", filepath.Join(src, "a/link")))
	must(os.WriteFile(filepath.Join(src, "shared"), []byte("copied"), 0o644))
	// In dst, shared is a hard link of keep: copying must not change keep.
	must(os.WriteFile(filepath.Join(dst, "keep"), []byte("original"), 0o644))
	must(os.Link(filepath.Join(dst, "keep"), filepath.Join(dst, "shared")))
	if err := busyroot.Copy(src, dst); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "a/b/f")); err != nil || string(b) != "new" {
		t.Fatalf("file: %q %v", b, err)
	}
	if fi, _ := os.Stat(filepath.Join(dst, "a/b/f")); fi.Mode().Perm() != 0o640 {
		t.Errorf("file mode %v", fi.Mode())
	}
	if fi, _ := os.Stat(filepath.Join(dst, "a/b")); fi.Mode().Perm() != 0o750 {
		t.Errorf("dir mode %v", fi.Mode())
	}
	if target, err := os.Readlink(filepath.Join(dst, "a/link")); err != nil || target != "b/f" {
		t.Errorf("symlink: %q %v", target, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "keep")); string(b) != "original" {
		t.Errorf("a hard link in dst was written through: keep is %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "shared")); string(b) != "copied" {
		t.Errorf("shared is %q", b)
	}
}
