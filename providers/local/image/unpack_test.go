package image

import (
	"archive/tar"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/internal/testing/testimage"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

type E = testimage.Entry

func TestUnpackRefusesEscapes(t *testing.T) {
	ctx := context.Background()
	outside := t.TempDir() // a host directory a layer tries to write into
	rel, err := filepath.Rel("/", outside)
	if err != nil {
		t.Fatal(err)
	}
	deep := strings.Repeat("../", 20) + rel // far enough up to be / from any state dir
	cases := []struct {
		name    string
		entries []E
		mention string // the error names this entry
	}{
		{"dotdot", []E{{Name: "ok", Body: "x"}, {Name: deep + "/pwned", Body: "x"}}, deep + "/pwned"},
		{"dotdot-inside", []E{{Name: "a/../../pwned", Body: "x"}}, "a/../../pwned"},
		{"absolute", []E{{Name: outside + "/pwned", Body: "x"}}, outside + "/pwned"},
		{"write-through-absolute-symlink", []E{
			{Name: "lnk", Type: tar.TypeSymlink, Link: outside},
			{Name: "lnk/pwned", Body: "x"},
		}, "lnk/pwned"},
		{"write-through-relative-symlink", []E{
			{Name: "lnk", Type: tar.TypeSymlink, Link: deep},
			{Name: "lnk/pwned", Body: "x"},
		}, "lnk/pwned"},
		{"write-through-symlink-inside-layer", []E{
			{Name: "dir/"},
			{Name: "lnk", Type: tar.TypeSymlink, Link: "dir"},
			{Name: "lnk/f", Body: "x"},
		}, "lnk/f"},
		{"symlink-dir-through-file", []E{
			{Name: "f", Body: "x"},
			{Name: "f/g", Body: "x"},
		}, "f/g"},
		{"mkdir-through-symlink", []E{
			{Name: "lnk", Type: tar.TypeSymlink, Link: outside},
			{Name: "lnk/sub/"},
		}, "lnk/sub/"},
		{"whiteout-through-symlink", []E{
			{Name: "lnk", Type: tar.TypeSymlink, Link: outside},
			{Name: "lnk/.wh.keep"},
		}, "lnk/.wh.keep"},
		{"opaque-through-symlink", []E{
			{Name: "lnk", Type: tar.TypeSymlink, Link: outside},
			{Name: "lnk/.wh..wh..opq"},
		}, "lnk/.wh..wh..opq"},
		{"hardlink-absolute", []E{{Name: "hl", Type: tar.TypeLink, Link: outside + "/keep"}}, "hl"},
		{"hardlink-dotdot", []E{{Name: "hl", Type: tar.TypeLink, Link: deep + "/keep"}}, "hl"},
		{"hardlink-not-in-layer", []E{{Name: "hl", Type: tar.TypeLink, Link: "etc/passwd"}}, "hl"},
		{"hardlink-through-symlink", []E{
			{Name: "lnk", Type: tar.TypeSymlink, Link: outside},
			{Name: "hl", Type: tar.TypeLink, Link: "lnk/keep"},
		}, "hl"},
		{"hardlink-to-dir", []E{{Name: "d/"}, {Name: "hl", Type: tar.TypeLink, Link: "d"}}, "hl"},
	}
	keep := filepath.Join(outside, "keep")
	if err := os.WriteFile(keep, []byte("host file"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t)
			file := testimage.WriteTar(t, c.entries...)
			_, err := s.Import(ctx, "example.com/evil:"+c.name, file)
			wantClass(t, err, errdefs.InvalidArgument, file, c.mention)
			assertNothingLeft(t, s, outside)
		})
	}
	// The same attack through a registry pull.
	t.Run("pull", func(t *testing.T) {
		layer := testimage.Layer(t, E{Name: "lnk", Type: tar.TypeSymlink, Link: outside}, E{Name: "lnk/pwned", Body: "x"})
		host := testimage.Serve(t, map[string]v1.Image{"evil:1": testimage.Image(t, v1.Config{}, layer)})
		s := newStore(t)
		_, err := s.Pull(ctx, host+"/evil:1")
		wantClass(t, err, errdefs.InvalidArgument, "evil:1", "lnk/pwned")
		assertNothingLeft(t, s, outside)
	})
	// A malicious layer on top of a good one: the good one may stay (it
	// is complete and verified) but the image is not recorded.
	t.Run("second-layer", func(t *testing.T) {
		good := testimage.Layer(t, E{Name: "good", Body: "x"})
		bad := testimage.Layer(t, E{Name: "../pwned", Body: "x"})
		host := testimage.Serve(t, map[string]v1.Image{"evil:2": testimage.Image(t, v1.Config{}, good, bad)})
		s := newStore(t)
		_, err := s.Pull(ctx, host+"/evil:2")
		wantClass(t, err, errdefs.InvalidArgument, "../pwned")
		for _, d := range layerDirs(t, s) {
			if strings.HasPrefix(d, ".") {
				t.Errorf("temporary dir left: %s", d)
			}
		}
		if l, _ := s.List(ctx); len(l) != 0 {
			t.Errorf("index holds %v", l)
		}
	})
}

func assertNothingLeft(t *testing.T, s *Store, outside string) {
	t.Helper()
	if d := layerDirs(t, s); len(d) != 0 {
		t.Errorf("left in layers dir: %v", d)
	}
	if l, _ := s.List(context.Background()); len(l) != 0 {
		t.Errorf("index holds %v", l)
	}
	ents, _ := os.ReadDir(outside)
	if len(ents) != 1 || ents[0].Name() != "keep" {
		t.Errorf("outside dir now holds %v", ents)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "keep")); string(b) != "host file" {
		t.Errorf("host file changed: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(filepath.Dir(s.layersDir), "pwned")); err == nil {
		t.Errorf("pwned written beside the layers dir")
	}
}

func TestUnpackKeepsMetadata(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("ownership and whiteouts need root")
	}
	ctx := context.Background()
	file := testimage.WriteTar(t,
		E{Name: "usr/bin/"},
		E{Name: "usr/bin/su", Body: "#!/bin/sh\n", Mode: 0o4755, UID: 0, GID: 0},
		E{Name: "usr/bin/wall", Body: "w", Mode: 0o2755, UID: 0, GID: 5},
		E{Name: "home/user/", Mode: 0o750, UID: 1000, GID: 1000},
		E{Name: "home/user/f", Body: "mine", Mode: 0o600, UID: 1000, GID: 1000},
		E{Name: "shared/", Mode: 0o3777},
		E{Name: "home/user/link", Type: tar.TypeLink, Link: "home/user/f"},
		E{Name: "home/user/sym", Type: tar.TypeSymlink, Link: "/etc/passwd", UID: 1000, GID: 1000},
		E{Name: "dev/", Mode: 0o755},
		E{Name: "dev/sda", Type: tar.TypeBlock, Devmajor: 8, Mode: 0o660},
		E{Name: "dev/mem", Type: tar.TypeChar, Devmajor: 1, Devminor: 1, Mode: 0o640},
		E{Name: "run/fifo", Type: tar.TypeFifo, Mode: 0o620},
		E{Name: "x", Body: "x", PAX: map[string]string{
			"SCHILY.xattr.user.note":                "kept",
			"SCHILY.xattr.trusted.overlay.redirect": "/etc",
		}},
		// A later entry replaces an earlier one, and a directory replaced by
		// a symlink does not get the old directory's mode through the link.
		E{Name: "replaced", Body: "old"},
		E{Name: "replaced", Body: "new"},
		E{Name: "zz-target/", Mode: 0o1750},
		E{Name: "was-dir/", Mode: 0o700},
		E{Name: "was-dir/child", Body: "c"},
		E{Name: "was-dir", Type: tar.TypeSymlink, Link: "zz-target"},
	)
	s := newStore(t)
	img, err := s.Import(ctx, "example.com/meta:v1", file)
	if err != nil {
		t.Fatal(err)
	}
	l := img.Layers[0]
	st := func(p string) *syscall.Stat_t {
		t.Helper()
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(l, p), &st); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		return &st
	}
	if m := st("usr/bin/su").Mode; m&07777 != 04755 {
		t.Errorf("su mode %o, want 4755", m&07777)
	}
	if s := st("usr/bin/wall"); s.Mode&07777 != 02755 || s.Gid != 5 {
		t.Errorf("wall mode %o gid %d", s.Mode&07777, s.Gid)
	}
	if s := st("home/user"); s.Mode&07777 != 0o750 || s.Uid != 1000 || s.Gid != 1000 {
		t.Errorf("home/user mode %o owner %d:%d", s.Mode&07777, s.Uid, s.Gid)
	}
	if s := st("shared"); s.Mode&07777 != 03777 {
		t.Errorf("shared mode %o, want 3777", s.Mode&07777)
	}
	f, link := st("home/user/f"), st("home/user/link")
	if f.Ino != link.Ino || f.Uid != 1000 || f.Mode&0o777 != 0o600 {
		t.Errorf("hardlink ino %d vs %d, f owner %d mode %o", f.Ino, link.Ino, f.Uid, f.Mode&0o777)
	}
	if s := st("home/user/sym"); s.Uid != 1000 || s.Mode&syscall.S_IFMT != syscall.S_IFLNK {
		t.Errorf("symlink owner %d type %o", s.Uid, s.Mode&syscall.S_IFMT)
	}
	for _, dev := range []string{"dev/sda", "dev/mem"} {
		if _, err := os.Lstat(filepath.Join(l, dev)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("device node %s was created: %v", dev, err)
		}
	}
	if s := st("run/fifo"); s.Mode&syscall.S_IFMT != syscall.S_IFIFO {
		t.Errorf("fifo type %o", s.Mode&syscall.S_IFMT)
	}
	buf := make([]byte, 64)
	if n, err := unix.Lgetxattr(filepath.Join(l, "x"), "user.note", buf); err != nil || string(buf[:n]) != "kept" {
		t.Errorf("user.note = %q, %v", buf[:max(n, 0)], err)
	}
	if _, err := unix.Lgetxattr(filepath.Join(l, "x"), "trusted.overlay.redirect", buf); !errors.Is(err, unix.ENODATA) {
		t.Errorf("trusted.overlay.redirect from the layer was set: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(l, "replaced")); string(b) != "new" {
		t.Errorf("replaced = %q", b)
	}
	if s := st("was-dir"); s.Mode&syscall.S_IFMT != syscall.S_IFLNK {
		t.Errorf("was-dir is not the symlink that replaced it")
	}
	if s := st("zz-target"); s.Mode&07777 != 01750 {
		t.Errorf("zz-target mode %o, want 1750: was-dir's mode went through the link that replaced it", s.Mode&07777)
	}
	if fi, _ := os.Stat(filepath.Join(l, "x")); !fi.ModTime().Equal(testimage.Epoch) {
		t.Errorf("mtime %v, want %v", fi.ModTime(), testimage.Epoch)
	}
	if fi, _ := os.Stat(filepath.Join(l, "home/user")); !fi.ModTime().Equal(testimage.Epoch) {
		t.Errorf("dir mtime %v, want %v", fi.ModTime(), testimage.Epoch)
	}
}

func TestWhiteouts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("overlay whiteouts need root")
	}
	ctx := context.Background()
	lower := testimage.Layer(t,
		E{Name: "a/"}, E{Name: "a/gone", Body: "1"}, E{Name: "a/stays", Body: "2"},
		E{Name: "b/"}, E{Name: "b/old1", Body: "3"}, E{Name: "b/sub/"}, E{Name: "b/sub/old2", Body: "4"},
		E{Name: "c", Body: "5"},
	)
	upper := testimage.Layer(t,
		E{Name: "a/"}, E{Name: "a/.wh.gone"},
		E{Name: "b/.wh..wh..opq"}, E{Name: "b/new", Body: "6"},
		E{Name: ".wh.c"},
		E{Name: "d/.wh..wh.plnk"}, // AUFS metadata: ignored
	)
	host := testimage.Serve(t, map[string]v1.Image{"wh:1": testimage.Image(t, v1.Config{}, lower, upper)})
	s := newStore(t)
	img, err := s.Pull(ctx, host+"/wh:1")
	if err != nil {
		t.Fatal(err)
	}
	top := img.Layers[1]
	for _, p := range []string{"a/gone", "c"} {
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(top, p), &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFCHR || st.Rdev != 0 {
			t.Errorf("%s: want a 0:0 char device, got mode %o rdev %d err %v", p, st.Mode, st.Rdev, err)
		}
	}
	buf := make([]byte, 8)
	if n, err := unix.Lgetxattr(filepath.Join(top, "b"), opaqueXattr, buf); err != nil || string(buf[:n]) != "y" {
		t.Errorf("b opaque xattr = %q, %v", buf[:max(n, 0)], err)
	}
	if _, err := os.Lstat(filepath.Join(top, "a/.wh.gone")); err == nil {
		t.Errorf("the .wh. file itself was written")
	}
	if ents, _ := os.ReadDir(filepath.Join(top, "d")); len(ents) != 0 {
		t.Errorf("d holds %v", ents)
	}

	// The real check: overlayfs shows what the image means.
	merged := t.TempDir()
	opts := "lowerdir=" + img.Layers[1] + ":" + img.Layers[0]
	if err := unix.Mount("overlay", merged, "overlay", unix.MS_RDONLY, opts); err != nil {
		t.Skipf("cannot mount overlayfs here: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(merged, unix.MNT_DETACH) })
	for p, want := range map[string]string{"a/stays": "2", "b/new": "6"} {
		if b, err := os.ReadFile(filepath.Join(merged, p)); err != nil || string(b) != want {
			t.Errorf("merged %s = %q, %v; want %q", p, b, err, want)
		}
	}
	for _, p := range []string{"a/gone", "b/old1", "b/sub", "c"} {
		if _, err := os.Lstat(filepath.Join(merged, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("merged %s still visible: %v", p, err)
		}
	}
}
