package seed

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// The seeded rootfs runs a real bash on its own: chrooted into the
// unpacked tar, /bin/bash -l -c (as the E2B SDKs call it) does arithmetic
// that busybox sh would also do, and bash-only syntax that it would not.
func TestSeedHasWorkingBash(t *testing.T) {
	bb := needBusybox(t)
	if os.Geteuid() != 0 {
		t.Skip("chroot needs root")
	}
	files, err := bashFiles()
	if err != nil {
		t.Fatal(err)
	}
	if files == nil {
		t.Skip("the host has no bash")
	}
	var buf bytes.Buffer
	if err := BusyboxTar(&buf, bb); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			os.MkdirAll(p, os.FileMode(h.Mode))
		case tar.TypeSymlink:
			os.Symlink(h.Linkname, p)
		case tar.TypeReg:
			b, _ := io.ReadAll(tr)
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, b, os.FileMode(h.Mode)); err != nil {
				t.Fatal(err)
			}
		}
	}
	cmd := exec.Command("/bin/bash", "-l", "-c", `a=(x y z); echo "${#a[@]} $((6*7)) $BASH_VERSION"`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/bin:/usr/bin"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bash in the seeded root: %v: %s", err, out)
	}
	if !bytes.HasPrefix(out, []byte("3 42 5.")) {
		t.Fatalf("bash said %q", out)
	}
}
