package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/internal/testing/testimage"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// commitParent imports a small rootfs to build on.
func commitParent(t *testing.T, s *Store) Image {
	t.Helper()
	type E = testimage.Entry
	tarFile := testimage.WriteTar(t,
		E{Name: "a", Body: "old"}, E{Name: "keep", Body: "k"},
		E{Name: "d/"}, E{Name: "d/x", Body: "x"}, E{Name: "d/y", Body: "y"},
		E{Name: "e/"}, E{Name: "e/z", Body: "z"},
		E{Name: "tmp/", Mode: 0o1777},
	)
	img, err := s.Import(context.Background(), "parent:1", tarFile)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// upperDir makes what an overlay's upper directory holds after a build
// step: a changed file, a new one, a whiteout, an opaque directory, links,
// xattrs (a user one to keep, a trusted one to drop), and an excluded tree.
func upperDir(t *testing.T) string {
	t.Helper()
	u := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, body string, mode os.FileMode) {
		t.Helper()
		must(os.MkdirAll(filepath.Dir(filepath.Join(u, p)), 0o755))
		must(os.WriteFile(filepath.Join(u, p), []byte(body), mode))
		must(os.Chmod(filepath.Join(u, p), mode))
	}
	write("a", "new", 0o644)
	write("bin/tool", "#!/bin/sh\n", 0o755)
	must(os.Chown(filepath.Join(u, "bin/tool"), 1000, 1001))
	must(unix.Chmod(filepath.Join(u, "bin/tool"), 0o4755)) // chown cleared setuid
	write("bin/peer", "", 0o644)
	must(os.Remove(filepath.Join(u, "bin/peer")))
	must(os.Link(filepath.Join(u, "bin/tool"), filepath.Join(u, "bin/peer")))
	must(os.Symlink("tool", filepath.Join(u, "bin/alias")))
	must(unix.Mkfifo(filepath.Join(u, "bin/fifo"), 0o600))
	must(os.Mkdir(filepath.Join(u, "d"), 0o755))
	must(unix.Mknod(filepath.Join(u, "d/x"), unix.S_IFCHR, 0)) // whiteout of d/x
	must(os.Mkdir(filepath.Join(u, "e"), 0o700))
	must(unix.Setxattr(filepath.Join(u, "e"), opaqueXattr, []byte("y"), 0))
	write("e/w", "w", 0o600)
	must(unix.Setxattr(filepath.Join(u, "a"), "user.note", []byte("hello"), 0))
	must(unix.Setxattr(filepath.Join(u, "a"), "trusted.overlay.origin", []byte("x"), 0))
	write(".berth/agent", "agent", 0o755)
	write("etc/hosts", "", 0o644)
	write("etc/motd", "hi", 0o644)
	return u
}

func excludeBuildMounts(p string) bool { return p == ".berth" || p == "etc/hosts" }

func TestCommitLayer(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("whiteouts (mknod) and trusted.* xattrs need root")
	}
	ctx := context.Background()
	s := newStore(t)
	parent := commitParent(t, s)
	upper := upperDir(t)
	cfg := parent.Config
	cfg.Env = append(slices.Clone(cfg.Env), "X=1")
	cfg.WorkingDir, cfg.User = "/work", "nobody"
	img, err := s.Commit(ctx, CommitSpec{Ref: "berth.build/t:1", Parent: parent, Dir: upper, Exclude: excludeBuildMounts, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if len(img.Layers) != 2 || img.DiffIDs[0] != parent.DiffIDs[0] {
		t.Fatalf("layers %v; want the parent's then one more", img.DiffIDs)
	}
	if img.ID == parent.ID || img.Config.WorkingDir != "/work" || img.Config.User != "nobody" || !slices.Contains(img.Config.Env, "X=1") {
		t.Fatalf("image %+v", img)
	}
	got, err := s.Resolve(ctx, "berth.build/t:1")
	if err != nil || got.ID != img.ID || !slices.Equal(got.Layers, img.Layers) {
		t.Fatalf("resolve: %+v, %v", got, err)
	}

	// The layer is an OCI layer: re-tar the committed tree and read it.
	names := map[string]*tar.Header{}
	var buf bytes.Buffer
	if err := writeLayer(ctx, &buf, upper, excludeBuildMounts); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names[h.Name] = h
	}
	for _, n := range []string{"d/.wh.x", "e/.wh..wh..opq", "a", "bin/tool", "bin/peer", "bin/alias", "etc/motd"} {
		if names[n] == nil {
			t.Errorf("layer tar lacks %s (has %v)", n, keys(names))
		}
	}
	for _, n := range []string{"d/x", ".berth/", ".berth/agent", "etc/hosts"} {
		if names[n] != nil {
			t.Errorf("layer tar has %s", n)
		}
	}
	// Names go in order, so bin/peer is the file and bin/tool its link.
	if h := names["bin/tool"]; h != nil && (h.Typeflag != tar.TypeLink || h.Linkname != "bin/peer") {
		t.Errorf("bin/tool: type %c link %q; want a hard link to bin/peer", h.Typeflag, h.Linkname)
	}
	if h := names["bin/peer"]; h != nil && h.Mode != 0o4755 {
		t.Errorf("bin/peer: tar mode %o, want 4755", h.Mode)
	}
	if h := names["a"]; h != nil && (h.PAXRecords["SCHILY.xattr.user.note"] != "hello" || h.PAXRecords["SCHILY.xattr.trusted.overlay.origin"] != "") {
		t.Errorf("a xattrs: %v", h.PAXRecords)
	}

	// The unpacked layer and the overlay of the image mean what the upper
	// directory meant.
	top := img.Layers[1]
	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(top, "bin/tool"), &st); err != nil || st.Uid != 1000 || st.Gid != 1001 || st.Mode&0o7777 != 0o4755 {
		t.Errorf("bin/tool: uid %d gid %d mode %o err %v", st.Uid, st.Gid, st.Mode&0o7777, err)
	}
	var st2 syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(top, "bin/peer"), &st2); err != nil || st2.Ino != st.Ino {
		t.Errorf("bin/peer is not bin/tool's hard link: %v", err)
	}
	merged := t.TempDir()
	if err := unix.Mount("overlay", merged, "overlay", unix.MS_RDONLY, "lowerdir="+img.Layers[1]+":"+img.Layers[0]); err != nil {
		t.Skipf("cannot mount overlayfs here: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(merged, unix.MNT_DETACH) })
	for p, want := range map[string]string{"a": "new", "keep": "k", "d/y": "y", "e/w": "w", "bin/alias": "#!/bin/sh\n"} {
		if b, err := os.ReadFile(filepath.Join(merged, p)); err != nil || string(b) != want {
			t.Errorf("merged %s = %q, %v; want %q", p, b, err, want)
		}
	}
	for _, p := range []string{"d/x", "e/z", ".berth", "etc/hosts"} {
		if _, err := os.Lstat(filepath.Join(merged, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("merged %s visible: %v", p, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(merged, "tmp")); err != nil || fi.Mode()&os.ModeSticky == 0 {
		t.Errorf("tmp lost its sticky bit: %v %v", fi, err)
	}
	if fi, err := os.Lstat(filepath.Join(merged, "bin/fifo")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("bin/fifo: %v %v", fi, err)
	}

	// Removing the built image keeps the parent's layer, which it still uses.
	if err := s.Remove(ctx, "berth.build/t:1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Resolve(ctx, "parent:1"); err != nil {
		t.Fatalf("parent after removing the child: %v", err)
	}
}

func keys(m map[string]*tar.Header) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Two commits of the same tree store one layer; a commit without a
// directory changes only the config.
func TestCommitSharesLayersAndConfigOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("whiteouts (mknod) need root")
	}
	ctx := context.Background()
	s := newStore(t)
	parent := commitParent(t, s)
	upper := upperDir(t)
	a, err := s.Commit(ctx, CommitSpec{Ref: "b:1", Parent: parent, Dir: upper, Config: parent.Config})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Commit(ctx, CommitSpec{Ref: "b:2", Parent: parent, Dir: upper, Config: parent.Config})
	if err != nil {
		t.Fatal(err)
	}
	if a.DiffIDs[1] != b.DiffIDs[1] || a.ID != b.ID {
		t.Errorf("same tree, different layers: %v %v", a.DiffIDs, b.DiffIDs)
	}
	if n := len(layerDirs(t, s)); n != 2 {
		t.Errorf("layers dir holds %d entries, want 2: %v", n, layerDirs(t, s))
	}
	cfg := parent.Config
	cfg.User = "nobody"
	c, err := s.Commit(ctx, CommitSpec{Ref: "b:3", Parent: parent, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.DiffIDs, parent.DiffIDs) || c.ID == parent.ID || c.Config.User != "nobody" {
		t.Errorf("config-only commit: %+v", c)
	}
}

func TestCommitRefusals(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("trusted.* xattrs need root")
	}
	ctx := context.Background()
	s := newStore(t)
	parent := commitParent(t, s)

	redirected := t.TempDir()
	if err := os.Mkdir(filepath.Join(redirected, "moved"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(filepath.Join(redirected, "moved"), redirectXattr, []byte("/e"), 0); err != nil {
		t.Fatal(err)
	}
	_, err := s.Commit(ctx, CommitSpec{Ref: "r:1", Parent: parent, Dir: redirected})
	wantClass(t, err, errdefs.NotSupported, "moved", redirectXattr)
	if _, err := s.Resolve(ctx, "r:1"); errdefs.ClassOf(err) != errdefs.NotFound {
		t.Errorf("a refused commit was recorded: %v", err)
	}
	if n := len(layerDirs(t, s)); n != 1 {
		t.Errorf("a refused commit left layers: %v", layerDirs(t, s))
	}

	gone := parent
	gone.DiffIDs = append(slices.Clone(parent.DiffIDs), "sha256:"+string(bytes.Repeat([]byte("ab"), 32)))
	_, err = s.Commit(ctx, CommitSpec{Ref: "r:2", Parent: gone, Dir: t.TempDir()})
	wantClass(t, err, errdefs.NotFound, "missing")

	_, err = s.Commit(ctx, CommitSpec{Ref: "UPPER:bad", Parent: parent})
	wantClass(t, err, errdefs.InvalidArgument)
}
