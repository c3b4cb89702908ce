package image

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/berth-sh/berth/internal/testing/testimage"
)

// TestPullDebian pulls a real distribution image: thousands of files,
// hardlinks, setuid binaries, device nodes in /dev.
func TestPullDebian(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Debian rootfs with debootstrap the first time of the day (~25 s)")
	}
	host := testimage.Serve(t, map[string]v1.Image{"debian:minbase": testimage.Debian(t)})
	s := newStore(t)
	img, err := s.Pull(context.Background(), host+"/debian:minbase")
	if err != nil {
		t.Fatal(err)
	}
	l := img.Layers[0]
	osr, err := os.ReadFile(filepath.Join(l, "etc/os-release"))
	if err != nil || !strings.Contains(string(osr), testimage.DebianSuite) {
		t.Errorf("etc/os-release: %q %v", osr, err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(l, "usr/bin/su"), &st); err != nil || st.Mode&04000 == 0 || st.Uid != 0 {
		t.Errorf("usr/bin/su: mode %o uid %d err %v; want setuid root", st.Mode, st.Uid, err)
	}
	if target, err := os.Readlink(filepath.Join(l, "bin")); err != nil || target != "usr/bin" {
		t.Errorf("bin -> %q %v (merged /usr)", target, err)
	}
	ents, err := os.ReadDir(filepath.Join(l, "dev"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Type()&(os.ModeDevice|os.ModeCharDevice) != 0 {
			t.Errorf("device node dev/%s unpacked", e.Name())
		}
	}
}

// BenchmarkPullDebian measures pulling a Debian minbase image from a
// registry on loopback and unpacking it, into an empty store each time.
func BenchmarkPullDebian(b *testing.B) {
	tarPath := testimage.DebianTar(b)
	host := testimage.Serve(b, map[string]v1.Image{"debian:minbase": testimage.Debian(b)})
	if fi, err := os.Stat(tarPath); err == nil {
		b.SetBytes(fi.Size())
	}
	benchStores(b, func(s *Store) error {
		_, err := s.Pull(context.Background(), host+"/debian:minbase")
		return err
	})
}

// BenchmarkImportDebian measures importing the same rootfs from a tar file.
func BenchmarkImportDebian(b *testing.B) {
	tarPath := testimage.DebianTar(b)
	if fi, err := os.Stat(tarPath); err == nil {
		b.SetBytes(fi.Size())
	}
	benchStores(b, func(s *Store) error {
		_, err := s.Import(context.Background(), "example.com/debian:minbase", tarPath)
		return err
	})
}

// BenchmarkResolve measures finding a stored image, what every sandbox
// create does.
func BenchmarkResolve(b *testing.B) {
	s := newStore(b)
	host := testimage.Serve(b, map[string]v1.Image{"busybox:1": testimage.Busybox(b)})
	if _, err := s.Pull(context.Background(), host+"/busybox:1"); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.Resolve(context.Background(), host+"/busybox:1"); err != nil {
			b.Fatal(err)
		}
	}
}

func benchStores(b *testing.B, op func(*Store) error) {
	parent := b.TempDir()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir, err := os.MkdirTemp(parent, "state-")
		if err != nil {
			b.Fatal(err)
		}
		s, err := Open(dir, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := op(s); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		os.RemoveAll(dir)
		b.StartTimer()
	}
}
