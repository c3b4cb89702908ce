package sandbox_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/berth-sh/berth/internal/testing/fakeprovider"
	"github.com/berth-sh/berth/internal/testing/tartest"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/driver"
)

// TestUploadFallbackRefuses: without a TreeUploader, escaping names are
// InvalidArgument and links NotSupported, and nothing lands outside dir.
func TestUploadFallbackRefuses(t *testing.T) {
	p, _ := newFake(t, fakeprovider.Options{})
	sb := create(t, p)
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		tar  []byte
		want sandbox.Class
	}{
		{"dot-dot", tartest.Build(t, tartest.File("../escaped", "x")), sandbox.InvalidArgument},
		{"dot-dot inside", tartest.Build(t, tartest.File("a/../../escaped", "x")), sandbox.InvalidArgument},
		{"absolute", tartest.Build(t, tartest.File("/escaped", "x")), sandbox.InvalidArgument},
		{"symlink", tartest.Build(t, tartest.Link(tar.TypeSymlink, "l", "/")), sandbox.NotSupported},
		{"hardlink", tartest.Build(t, tartest.File("a", "x"), tartest.Link(tar.TypeLink, "b", "a")), sandbox.NotSupported},
		{"fifo", tartest.Build(t, tartest.Entry{Hdr: tar.Header{Name: "f", Typeflag: tar.TypeFifo}}), sandbox.NotSupported},
		{"not a tar", bytes.Repeat([]byte("garbage!"), 100), sandbox.InvalidArgument},
	} {
		err := sb.Upload(ctx, "/w/in", bytes.NewReader(tc.tar))
		wantClass(t, tc.name, err, tc.want)
	}
	for _, p := range []string{"/w/escaped", "/escaped", "/w/in/l"} {
		if _, err := sb.Stat(ctx, p); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("%s exists after refused uploads: %v", p, err)
		}
	}
}

// recorder is a TreeUploader that notes every entry name it is given.
type recorder struct {
	driver.Sandbox
	mu    sync.Mutex
	names []string
}

func (r *recorder) UploadTar(_ context.Context, _ string, rd io.Reader) error {
	tr := tar.NewReader(rd)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.names = append(r.names, h.Name)
		r.mu.Unlock()
	}
}

type wrapProvider struct {
	driver.Provider
	wrap func(driver.Sandbox) driver.Sandbox
}

func (w wrapProvider) Create(ctx context.Context, spec driver.Spec) (driver.Sandbox, error) {
	s, err := w.Provider.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	return w.wrap(s), nil
}

// TestUploadDriverNeverSeesRefusedEntries: with a TreeUploader the archive
// is checked on its way to the driver: entries before a bad one arrive, the
// bad one and everything after never do.
func TestUploadDriverNeverSeesRefusedEntries(t *testing.T) {
	for _, tc := range []struct {
		name string
		tar  []byte
		want []string
	}{
		{"dot-dot", tartest.Build(t, tartest.File("good", "g"), tartest.File("../evil", "e"), tartest.File("after", "a")), []string{"good"}},
		{"absolute", tartest.Build(t, tartest.File("/etc/evil", "e")), nil},
		{"through own symlink", tartest.Build(t, tartest.Link(tar.TypeSymlink, "l", "/"), tartest.File("l/etc/evil", "e")), []string{"l"}},
		{"hardlink through own symlink", tartest.Build(t, tartest.Link(tar.TypeSymlink, "l", "/etc"), tartest.Link(tar.TypeLink, "h", "l/shadow")), []string{"l"}},
		{"escaping hardlink", tartest.Build(t, tartest.Link(tar.TypeLink, "h", "../../etc/shadow")), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec *recorder
			_, d := newFake(t, fakeprovider.Options{})
			p := sandbox.NewProvider("rec", wrapProvider{d, func(s driver.Sandbox) driver.Sandbox {
				rec = &recorder{Sandbox: s}
				return rec
			}})
			sb := create(t, p)
			err := sb.Upload(t.Context(), "/dst", bytes.NewReader(tc.tar))
			wantClass(t, "upload", err, sandbox.InvalidArgument)
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if !slices.Equal(rec.names, tc.want) {
				t.Errorf("driver saw %q, want %q", rec.names, tc.want)
			}
		})
	}
}

// evil is a TreeDownloader that serves a crafted archive, as a compromised
// sandbox could.
type evil struct {
	driver.Sandbox
	tar []byte
}

func (e *evil) DownloadTar(context.Context, string) (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(e.tar)), nil
}

// TestDownloadDirAttacks: whatever a sandbox serves, DownloadDir writes
// nothing outside hostDir.
func TestDownloadDirAttacks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries func(outside string) []tartest.Entry
	}{
		{"dot-dot", func(string) []tartest.Entry { return []tartest.Entry{tartest.File("../pwned", "x")} }},
		{"absolute", func(o string) []tartest.Entry { return []tartest.Entry{tartest.File(filepath.Join(o, "pwned"), "x")} }},
		{"absolute symlink", func(o string) []tartest.Entry {
			return []tartest.Entry{tartest.Link(tar.TypeSymlink, "l", o), tartest.File("l/pwned", "x")}
		}},
		{"relative symlink", func(string) []tartest.Entry {
			return []tartest.Entry{tartest.Link(tar.TypeSymlink, "l", "../outside"), tartest.File("l/pwned", "x")}
		}},
		{"hardlink out", func(o string) []tartest.Entry {
			return []tartest.Entry{tartest.Link(tar.TypeLink, "h", filepath.Join(o, "keep"))}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			outside := filepath.Join(base, "outside")
			os.Mkdir(outside, 0o755)
			os.WriteFile(filepath.Join(outside, "keep"), []byte("original"), 0o644)
			_, d := newFake(t, fakeprovider.Options{})
			p := sandbox.NewProvider("evil", wrapProvider{d, func(s driver.Sandbox) driver.Sandbox {
				return &evil{Sandbox: s, tar: tartest.Build(t, tc.entries(outside)...)}
			}})
			sb := create(t, p)
			err := sb.DownloadDir(t.Context(), "/anything", filepath.Join(base, "dst"))
			wantClass(t, "download dir", err, sandbox.InvalidArgument)
			got, _ := os.ReadDir(outside)
			if len(got) != 1 {
				t.Errorf("outside now holds %v", got)
			}
			if b, _ := os.ReadFile(filepath.Join(outside, "keep")); string(b) != "original" {
				t.Errorf("outside/keep now reads %q", b)
			}
			if top, _ := os.ReadDir(base); len(top) != 2 {
				t.Errorf("new entries next to hostDir: %v", top)
			}
			if _, err := os.Lstat(filepath.Join(base, "dst", "l")); err == nil {
				t.Error("a symlink pointing out of hostDir was left in it")
			}
		})
	}
}

// TestUploadDirHostLinkOut: a host symlink pointing outside hostDir is not
// followed: its target's content never reaches the sandbox.
func TestUploadDirHostLinkOut(t *testing.T) {
	base := t.TempDir()
	secret := filepath.Join(base, "secret")
	os.WriteFile(secret, []byte("host secret"), 0o600)
	src := filepath.Join(base, "src")
	os.Mkdir(src, 0o755)
	os.WriteFile(filepath.Join(src, "ok.txt"), []byte("ok"), 0o644)
	os.Symlink(secret, filepath.Join(src, "link"))
	for _, native := range []bool{false, true} {
		p, _ := newFake(t, fakeprovider.Options{NativeTrees: native})
		sb := create(t, p)
		err := sb.UploadDir(t.Context(), src, "/dst")
		if err == nil {
			t.Errorf("native=%v: uploading a link out of the tree succeeded", native)
		}
		if b, err := sb.ReadFile(t.Context(), "/dst/link"); err == nil {
			t.Errorf("native=%v: /dst/link reads %q", native, b)
		}
	}
}

// TestDownloadPathsAgree: the fallback walk and a driver's own archive give
// the same entries for the same tree.
func TestDownloadPathsAgree(t *testing.T) {
	state := t.TempDir()
	plain, _ := newFake(t, fakeprovider.Options{StateDir: state})
	native, _ := newFake(t, fakeprovider.Options{StateDir: state, NativeTrees: true})
	sb := create(t, plain)
	ctx := t.Context()
	up := tartest.Build(t, tartest.File("a", "alpha"), tartest.Entry{Hdr: tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o750}},
		tartest.File("d/b", string(bytes.Repeat([]byte{0, 1, 2}, 5000))), tartest.Link(tar.TypeSymlink, "d/l", "b"))
	nsb, err := native.Connect(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer nsb.Close()
	if err := nsb.Upload(ctx, "/t", bytes.NewReader(up)); err != nil {
		t.Fatal(err)
	}
	read := func(s *sandbox.Sandbox) []string {
		rc, err := s.Download(ctx, "/t")
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		var out []string
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				return out
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(tr)
			out = append(out, h.Name+" "+string(h.Typeflag)+" "+h.Linkname+" "+os.FileMode(h.Mode).String()+" "+string(b[:min(len(b), 8)]))
		}
	}
	a, b := read(sb), read(nsb)
	if !slices.Equal(a, b) || len(a) != 4 {
		t.Errorf("fallback download %q\n   native download %q", a, b)
	}
}

// TestDownloadEarlyClose: closing a fallback download half way stops its
// goroutine (goleak checks) without an error.
func TestDownloadEarlyClose(t *testing.T) {
	p, _ := newFake(t, fakeprovider.Options{})
	sb := create(t, p)
	ctx := t.Context()
	if err := sb.WriteFile(ctx, "/big/f", bytes.Repeat([]byte("x"), 4<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	rc, err := sb.Download(ctx, "/big")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1024)
	if _, err := io.ReadFull(rc, buf); err != nil {
		t.Fatal(err)
	}
	if err := rc.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	_, err = sb.Download(ctx, "/missing")
	wantClass(t, "download of a missing path", err, sandbox.NotFound)
}
