package testimage

import (
	"archive/tar"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

const goarch = runtime.GOARCH

// BusyboxPaths are where Debian's busybox-static installs the binary.
var BusyboxPaths = []string{"/bin/busybox", "/usr/bin/busybox"}

var busybox struct {
	once  sync.Once
	tar   []byte
	cfg   v1.Config
	skip  string
	fatal error
}

// Busybox returns an image of one layer holding the host's static busybox
// with every applet linked in /bin (sh, cat, head, sleep, echo, ls, mkdir,
// ...), /etc/passwd and /etc/group with root and nobody, and /tmp. It skips
// the test when busybox-static is not installed.
func Busybox(t testing.TB) v1.Image {
	t.Helper()
	b, cfg := busyboxTar(t)
	return Image(t, cfg, layerOf(t, b))
}

// BusyboxTar writes the busybox image's rootfs as a plain tar in a test
// temp dir and returns its path.
func BusyboxTar(t testing.TB) string {
	t.Helper()
	b, _ := busyboxTar(t)
	p := filepath.Join(t.TempDir(), "busybox-rootfs.tar")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func busyboxTar(t testing.TB) ([]byte, v1.Config) {
	t.Helper()
	busybox.once.Do(func() {
		busybox.tar, busybox.skip, busybox.fatal = buildBusybox(t)
		busybox.cfg = v1.Config{
			Env: []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"},
			Cmd: []string{"sh"},
		}
	})
	if busybox.skip != "" {
		t.Skip(busybox.skip)
	}
	if busybox.fatal != nil {
		t.Fatal(busybox.fatal)
	}
	return busybox.tar, busybox.cfg
}

func findBusybox() string {
	for _, p := range BusyboxPaths {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// buildBusybox returns the rootfs tar, or why the test must skip.
func buildBusybox(t testing.TB) ([]byte, string, error) {
	bin := findBusybox()
	if bin == "" {
		return nil, "busybox not found (apt-get install busybox-static)", nil
	}
	if dyn, err := isDynamic(bin); err != nil {
		return nil, "", fmt.Errorf("testimage: %s: %w", bin, err)
	} else if dyn {
		return nil, bin + " is dynamically linked and cannot run in an empty image (apt-get install busybox-static)", nil
	}
	body, err := os.ReadFile(bin)
	if err != nil {
		return nil, "", fmt.Errorf("testimage: %w", err)
	}
	out, err := exec.Command(bin, "--list").Output()
	if err != nil {
		return nil, "", fmt.Errorf("testimage: %s --list: %w", bin, err)
	}
	entries := []Entry{
		{Name: "bin/"}, {Name: "dev/"}, {Name: "etc/"}, {Name: "home/"},
		{Name: "proc/"}, {Name: "root/", Mode: 0o700}, {Name: "sys/"},
		{Name: "tmp/", Mode: 0o1777}, {Name: "usr/"}, {Name: "usr/bin/"},
		{Name: "var/"},
		{Name: "bin/busybox", Body: string(body), Mode: 0o755},
		{Name: "etc/passwd", Body: "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"},
		{Name: "etc/group", Body: "root:x:0:\nnogroup:x:65534:\n"},
		{Name: "etc/hostname", Body: "busybox\n"},
	}
	for _, applet := range strings.Fields(string(out)) {
		if applet == "busybox" || strings.Contains(applet, "/") {
			continue
		}
		entries = append(entries, Entry{Name: "bin/" + applet, Type: tar.TypeSymlink, Link: "busybox"})
	}
	return TarBytes(t, entries...), "", nil
}

func isDynamic(p string) (bool, error) {
	f, err := elf.Open(p)
	if err != nil {
		return false, err
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return true, nil
		}
	}
	return false, nil
}
