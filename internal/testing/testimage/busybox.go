package testimage

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/berth-sh/berth/providers/local/image/seed"
)

const goarch = runtime.GOARCH

// BusyboxPaths are where Debian's busybox-static installs the binary.
var BusyboxPaths = seed.BusyboxPaths

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

// buildBusybox returns the rootfs tar (built by package seed, which the
// local provider uses to seed its default image), or why the test must skip.
func buildBusybox(t testing.TB) ([]byte, string, error) {
	t.Helper()
	bin, err := seed.FindBusybox()
	if err != nil {
		return nil, err.Error(), nil
	}
	var b bytes.Buffer
	if err := seed.BusyboxTar(&b, bin); err != nil {
		return nil, "", fmt.Errorf("testimage: %w", err)
	}
	return b.Bytes(), "", nil
}
