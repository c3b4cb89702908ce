package hosttar_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berth-sh/berth/internal/testing/tartest"
	"github.com/berth-sh/berth/sandbox/errdefs"
	"github.com/berth-sh/berth/sandbox/hosttar"
)

func TestCleanName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a", "a"}, {"./a", "a"}, {"a/b/", "a/b"}, {"a//b", "a/b"}, {".", "."}, {"./", "."},
		{"a/./b", "a/b"}, {"..a/b..", "..a/b.."},
	} {
		got, err := hosttar.CleanName(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("CleanName(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "/etc/passwd", "..", "../a", "a/../b", "a/..", `\abs`, "a\x00b"} {
		if _, err := hosttar.CleanName(bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("CleanName(%q) = %v, want InvalidArgument", bad, err)
		}
	}
}

func TestCheckSymlink(t *testing.T) {
	for _, tc := range []struct {
		name, target string
		ok           bool
	}{
		{"l", "a", true},
		{"d/l", "../a", true},
		{"d/e/l", "../../a", true},
		{"d/l", "..", true},
		{"l", ".", true},
		{"l", "/etc", false},
		{"l", "..", false},
		{"l", "../x", false},
		{"d/l", "../../x", false},
		{"d/l", "a/../../../x", false},
		{"l", "", false},
	} {
		err := hosttar.CheckSymlink(tc.name, tc.target)
		if (err == nil) != tc.ok {
			t.Errorf("CheckSymlink(%q, %q) = %v, want ok=%v", tc.name, tc.target, err, tc.ok)
		}
	}
}

func TestAncestors(t *testing.T) {
	if got := hosttar.Ancestors("a/b/c"); !slices.Equal(got, []string{"a", "a/b"}) {
		t.Errorf("Ancestors(a/b/c) = %q", got)
	}
	if got := hosttar.Ancestors("a"); len(got) != 0 {
		t.Errorf("Ancestors(a) = %q", got)
	}
}

// layout returns every path under dir with its kind, for before/after
// comparisons of what an extraction touched.
func layout(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		kind := d.Type().String()
		if d.Type().IsRegular() {
			b, _ := os.ReadFile(p)
			kind = "file:" + string(b)
		}
		out[rel] = kind
		return nil
	})
	return out
}

// TestExtractAttacks: archives that try to write outside the target dir
// fail, and the directory around the target is exactly as it was.
func TestExtractAttacks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries func(outside string) []tartest.Entry
	}{
		{"dot-dot name", func(string) []tartest.Entry { return []tartest.Entry{tartest.File("../escape", "x")} }},
		{"dot-dot inside name", func(string) []tartest.Entry { return []tartest.Entry{tartest.File("a/../../escape", "x")} }},
		{"absolute name", func(o string) []tartest.Entry { return []tartest.Entry{tartest.File(filepath.Join(o, "abs"), "x")} }},
		{"absolute symlink then write through", func(o string) []tartest.Entry {
			return []tartest.Entry{tartest.Symlink("link", o), tartest.File("link/pwned", "x")}
		}},
		{"relative escaping symlink", func(string) []tartest.Entry {
			return []tartest.Entry{tartest.Symlink("rel", "../outside"), tartest.File("rel/pwned", "x")}
		}},
		{"symlink chain", func(string) []tartest.Entry {
			// d/s -> .. is inside the tree; d/s/l would be created through it.
			return []tartest.Entry{tartest.Dir("d/"), tartest.Symlink("d/s", ".."), tartest.Symlink("d/s/l", "../outside")}
		}},
		{"write through an in-tree symlink dir", func(string) []tartest.Entry {
			return []tartest.Entry{tartest.Dir("real/"), tartest.Symlink("alias", "real"), tartest.File("alias/x", "x")}
		}},
		{"absolute hardlink", func(o string) []tartest.Entry {
			return []tartest.Entry{tartest.Hardlink("hl", filepath.Join(o, "keep"))}
		}},
		{"escaping hardlink", func(string) []tartest.Entry { return []tartest.Entry{tartest.Hardlink("hl", "../outside/keep")} }},
		{"file as the root", func(string) []tartest.Entry { return []tartest.Entry{tartest.File(".", "x")} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			outside := filepath.Join(base, "outside")
			dst := filepath.Join(base, "dst")
			for _, d := range []string{outside, dst} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(outside, "keep"), []byte("original"), 0o644); err != nil {
				t.Fatal(err)
			}
			before := layout(t, outside)
			root, err := os.OpenRoot(dst)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			err = hosttar.Extract(context.Background(), root, bytes.NewReader(tartest.Build(t, tc.entries(outside)...)))
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("extract = %v, want InvalidArgument", err)
			}
			if after := layout(t, outside); !mapsEqual(before, after) {
				t.Errorf("outside changed: %v -> %v", before, after)
			}
			entries, _ := os.ReadDir(base)
			if len(entries) != 2 {
				t.Errorf("new entries next to the target: %v", entries)
			}
			// No link left behind for a later, less careful reader to follow.
			filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.Type()&fs.ModeSymlink != 0 {
					target, _ := os.Readlink(p)
					resolved := filepath.Join(filepath.Dir(p), target)
					if filepath.IsAbs(target) || !strings.HasPrefix(resolved, dst+"/") && resolved != dst {
						t.Errorf("left a symlink %s -> %s pointing out of the target", p, target)
					}
				}
				return nil
			})
		})
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestExtractReplacesLinks: a file entry over a symlink replaces the link
// instead of writing through it, and set-id bits do not survive.
func TestExtractReplacesLinks(t *testing.T) {
	dst := t.TempDir()
	root, err := os.OpenRoot(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	suid := tartest.File("suid", "s")
	suid.Hdr.Mode = 0o4755
	ro := tartest.Dir("ro/")
	ro.Hdr.Mode = 0o555
	err = hosttar.Extract(context.Background(), root, bytes.NewReader(tartest.Build(t,
		tartest.Symlink("x", "y"), tartest.File("x", "replaced"), suid, ro, tartest.File("ro/inner", "ok"),
		tartest.Hardlink("x2", "x"), tartest.Entry{Hdr: tar.Header{Name: "fifo", Typeflag: tar.TypeFifo}},
	)))
	if err != nil {
		t.Fatalf("extract: %v", err)
	}
	if fi, err := os.Lstat(filepath.Join(dst, "x")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("x is %v, %v; want a regular file", fi, err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "y")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the link target y was written: %v", err)
	}
	if fi, _ := os.Stat(filepath.Join(dst, "suid")); fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 || fi.Mode().Perm() != 0o755 {
		t.Errorf("suid extracted with mode %v, want 0755 without set-id", fi.Mode())
	}
	if fi, _ := os.Stat(filepath.Join(dst, "ro")); fi.Mode().Perm() != 0o555 {
		t.Errorf("ro dir mode %v, want 0555 applied after its children", fi.Mode().Perm())
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "x2")); string(b) != "replaced" {
		t.Errorf("hard link x2 reads %q", b)
	}
	if _, err := os.Lstat(filepath.Join(dst, "fifo")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a FIFO entry was extracted: %v", err)
	}
	os.Chmod(filepath.Join(dst, "ro"), 0o755) // so TempDir can clean up as non-root
}

func TestWriteRoundTrip(t *testing.T) {
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "d/e"), 0o755)
	os.WriteFile(filepath.Join(src, "d/f.txt"), []byte("fff"), 0o600)
	os.WriteFile(filepath.Join(src, "top"), []byte("t"), 0o644)
	os.Symlink("d/f.txt", filepath.Join(src, "ln"))
	root, _ := os.OpenRoot(src)
	defer root.Close()

	var buf bytes.Buffer
	if err := hosttar.Write(context.Background(), &buf, root, "."); err != nil {
		t.Fatal(err)
	}
	var names []string
	tr := tar.NewReader(bytes.NewReader(buf.Bytes()))
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
	}
	if want := []string{"d/", "d/e/", "d/f.txt", "ln", "top"}; !slices.Equal(names, want) {
		t.Errorf("archive names %q, want %q", names, want)
	}

	dst := t.TempDir()
	droot, _ := os.OpenRoot(dst)
	defer droot.Close()
	if err := hosttar.Extract(context.Background(), droot, &buf); err != nil {
		t.Fatal(err)
	}
	if got, want := layout(t, dst), layout(t, src); !mapsEqual(got, want) {
		t.Errorf("round trip: %v, want %v", got, want)
	}
	if fi, _ := os.Stat(filepath.Join(dst, "d/f.txt")); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode after round trip %v", fi.Mode())
	}

	// One file: a single entry under its base name.
	buf.Reset()
	if err := hosttar.Write(context.Background(), &buf, root, "d/f.txt"); err != nil {
		t.Fatal(err)
	}
	h, err := tar.NewReader(&buf).Next()
	if err != nil || h.Name != "f.txt" || h.Size != 3 {
		t.Errorf("single file entry = %+v, %v", h, err)
	}
	// Missing is NotFound; climbing out is refused.
	if err := hosttar.Write(context.Background(), io.Discard, root, "nope"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("write a missing path: %v", err)
	}
	if err := hosttar.Write(context.Background(), io.Discard, root, "../x"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("write ../x: %v", err)
	}
}

func TestReadError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want errdefs.Class
	}{
		{tar.ErrHeader, errdefs.InvalidArgument},
		{io.ErrUnexpectedEOF, errdefs.InvalidArgument},
		{errors.New("connection reset"), errdefs.Unavailable},
		{errdefs.Errorf(errdefs.NotFound, "gone"), errdefs.NotFound},
		{context.Canceled, errdefs.Unknown},
		{context.DeadlineExceeded, errdefs.DeadlineExceeded},
	} {
		if got := errdefs.ClassOf(hosttar.ReadError(tc.err)); got != tc.want {
			t.Errorf("ReadError(%v) has class %v, want %v", tc.err, got, tc.want)
		}
	}
	if hosttar.ReadError(nil) != nil {
		t.Error("ReadError(nil) is not nil")
	}
}

// TestExtractCancelled: a cancelled extraction says so rather than blaming
// the archive.
func TestExtractCancelled(t *testing.T) {
	root, _ := os.OpenRoot(t.TempDir())
	defer root.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := hosttar.Extract(ctx, root, bytes.NewReader(tartest.Build(t, tartest.File("a", "x"))))
	if !errors.Is(err, context.Canceled) || errdefs.ClassOf(err) != errdefs.Unknown {
		t.Errorf("extract with a cancelled ctx: %v (class %v)", err, errdefs.ClassOf(err))
	}
}
