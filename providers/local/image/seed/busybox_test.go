package seed

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os/exec"
	"testing"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

func needBusybox(t *testing.T) string {
	t.Helper()
	bin, err := FindBusybox()
	if err != nil {
		t.Skipf("needs busybox-static: %v", err)
	}
	return bin
}

// The tar holds a runnable system: the binary, a sh applet linked to it,
// and the users; two builds are the same bytes.
func TestBusyboxTar(t *testing.T) {
	needBusybox(t)
	var a, b bytes.Buffer
	if err := BusyboxTar(&a, ""); err != nil {
		t.Fatal(err)
	}
	if err := BusyboxTar(&b, ""); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("two builds differ: the seeded layer digest would change on every seed")
	}
	got := map[string]*tar.Header{}
	tr := tar.NewReader(&a)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = h
		if h.Name == "etc/passwd" {
			body, _ := io.ReadAll(tr)
			if !bytes.HasPrefix(body, []byte("root:x:0:0:")) {
				t.Errorf("etc/passwd = %q", body)
			}
		}
	}
	if h := got["bin/busybox"]; h == nil || h.Typeflag != tar.TypeReg || h.Mode&0o111 == 0 || h.Size == 0 {
		t.Errorf("bin/busybox = %+v", h)
	}
	if h := got["bin/sh"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "busybox" {
		t.Errorf("bin/sh = %+v", h)
	}
	if h := got["tmp/"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("tmp/ = %+v", h)
	}
}

// A dynamically linked binary cannot run in an image without a libc.
func TestDynamicRefused(t *testing.T) {
	ls, err := exec.LookPath("ls")
	if err != nil {
		t.Skip("no ls")
	}
	if static, err := IsStatic(ls); err != nil || static {
		t.Skipf("%s is static here (%v)", ls, err)
	}
	err = BusyboxTar(io.Discard, ls)
	if !errors.Is(err, errdefs.ErrNotSupported) || !bytes.Contains([]byte(err.Error()), []byte("busybox-static")) {
		t.Errorf("dynamic binary: %v, want NotSupported naming busybox-static", err)
	}
}
