package sandboxtest

import (
	"archive/tar"
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/berth-sh/berth/sandbox"
)

var fileCases = []testCase{
	{name: "round-trip", run: testRoundTrip},
	{name: "mode-bits", run: testModeBits},
	{name: "list-dir", run: testListDir},
	{name: "stat", run: testStat},
	{name: "stat-symlink", run: testStatSymlink},
	{name: "make-dir", run: testMakeDir},
	{name: "remove", run: testRemove},
	{name: "not-found", run: testNotFound},
	{name: "read-dir-as-file", run: testReadDir},
	{name: "relative-path", run: testRelativePath},
	{name: "tree", run: testTree},
	{name: "tree-escape", run: testTreeEscape},
	{name: "host-dirs", run: testHostDirs},
	{name: "links", run: testLinks},
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func testRoundTrip(t *testing.T, h Harness) {
	ctx, _, sb := fresh(t, h)
	dir := workDir(t, ctx, sb)
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"text.txt", []byte("hello, sandbox\n")},
		{"binary.bin", all},
		{"big.bin", randomBytes(1<<20, 1)},
		{"a/b/c/nested.txt", []byte("parents are created")},
	} {
		p := dir + "/" + c.name
		if err := sb.WriteFile(ctx, p, c.data, 0o644); err != nil {
			t.Fatalf("write %s: %v", p, err)
		}
		got, err := sb.ReadFile(ctx, p)
		if err != nil {
			t.Fatalf("read %s: %v", p, err)
		}
		if !bytes.Equal(got, c.data) {
			t.Errorf("%s: read %d bytes back, not the %d written", c.name, len(got), len(c.data))
		}
	}
	// Writing again truncates.
	p := dir + "/text.txt"
	if err := sb.WriteFile(ctx, p, []byte("short"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := sb.ReadFile(ctx, p); string(got) != "short" {
		t.Errorf("after overwrite: %q, want %q", got, "short")
	}
}

func testModeBits(t *testing.T, h Harness) {
	ctx, _, sb := fresh(t, h)
	dir := workDir(t, ctx, sb)
	for _, mode := range []os.FileMode{0o755, 0o600, 0o640} {
		p := dir + "/mode-" + mode.String()
		if err := sb.WriteFile(ctx, p, []byte("x"), mode); err != nil {
			t.Fatal(err)
		}
		fi, err := sb.Stat(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if os.FileMode(fi.Mode)&os.ModePerm != mode {
			t.Errorf("%s: stat mode %o, want %o", p, fi.Mode, mode)
		}
	}
	// An executable bit that works: the script runs.
	if err := sb.WriteFile(ctx, dir+"/script.sh", []byte("#!/bin/sh\necho script-ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	res := run(t, ctx, sb, sandbox.Command{Args: []string{"./script.sh"}, Dir: dir})
	if string(res.Stdout) != "script-ran\n" {
		t.Errorf("./script.sh printed %q (exit %d, stderr %q)", res.Stdout, res.ExitCode, res.Stderr)
	}
}

func testListDir(t *testing.T, h Harness) {
	ctx, _, sb := fresh(t, h)
	dir := workDir(t, ctx, sb)
	for _, n := range []string{"b", "a", "c"} {
		if err := sb.WriteFile(ctx, dir+"/"+n, []byte(n+n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := sb.MakeDir(ctx, dir+"/d"); err != nil {
		t.Fatal(err)
	}
	fis, err := sb.ListDir(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, fi := range fis {
		names = append(names, fi.Name)
		want := sandbox.FileRegular
		if fi.Name == "d" {
			want = sandbox.FileDir
		}
		if fi.Type != want || fi.Path != dir+"/"+fi.Name {
			t.Errorf("entry %q: type %q path %q, want %q %q", fi.Name, fi.Type, fi.Path, want, dir+"/"+fi.Name)
		}
		if fi.Type == sandbox.FileRegular && fi.Size != 2 {
			t.Errorf("entry %q: size %d, want 2", fi.Name, fi.Size)
		}
	}
	if want := []string{"a", "b", "c", "d"}; !slices.Equal(names, want) {
		t.Errorf("list = %q, want %q (sorted by name)", names, want)
	}
	_, err = sb.ListDir(ctx, dir+"/a")
	wantClass(t, "list a file", err, sandbox.InvalidArgument)
}

func testStat(t *testing.T, h Harness) {
	ctx, _, sb := fresh(t, h)
	dir := workDir(t, ctx, sb)
	p := dir + "/f.txt"
	if err := sb.WriteFile(ctx, p, []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := sb.Stat(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Name != "f.txt" || fi.Path != p || fi.Type != sandbox.FileRegular || fi.Size != 5 {
		t.Errorf("stat file = %+v, want name f.txt, path %s, type file, size 5", fi, p)
	}
	fi, err = sb.Stat(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Type != sandbox.FileDir {
		t.Errorf("stat dir: type %q, want dir", fi.Type)
	}
}

func testMakeDir(t *testing.T, h Harness) {
	ctx, _, sb := fresh(t, h)
	dir := workDir(t, ctx, sb)
	p := dir + "/x/y/z"
	if err := sb.MakeDir(ctx, p); err != nil {
		t.Fatalf("make dir with parents: %v", err)
	}
	if fi, err := sb.Stat(ctx, p); err != nil || fi.Type != sandbox.FileDir {
		t.Errorf("stat new dir = %+v, %v", fi, err)
	}
	wantClass(t, "make an existing dir", sb.MakeDir(ctx, p), sandbox.AlreadyExists)
}

func testRemove(t *testing.T, h Harness) {
	ctx, _, sb := fresh(t, h)
	dir := workDir(t, ctx, sb)
	if err := sb.WriteFile(ctx, dir+"/f", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := sb.WriteFile(ctx, dir+"/t/sub/g", []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir + "/f", dir + "/t"} {
		if err := sb.Remove(ctx, p); err != nil {
			t.Fatalf("remove %s: %v", p, err)
		}
		_, err := sb.Stat(ctx, p)
		wantClass(t, "stat after remove", err, sandbox.NotFound)
	}
	wantClass(t, "remove a missing path", sb.Remove(ctx, dir+"/f"), sandbox.NotFound)
}

func testNotFound(t *testing.T, h Harness) {
	ctx, _, sb := fresh(t, h)
	missing := "/berth-suite-missing-" + randomHex(4)
	_, err := sb.ReadFile(ctx, missing)
	wantClass(t, "read a missing file", err, sandbox.NotFound)
	_, err = sb.Stat(ctx, missing)
	wantClass(t, "stat a missing file", err, sandbox.NotFound)
	_, err = sb.ListDir(ctx, missing)
	wantClass(t, "list a missing dir", err, sandbox.NotFound)
	_, err = sb.Download(ctx, missing)
	wantClass(t, "download a missing path", err, sandbox.NotFound)
}

func testReadDir(t *testing.T, h Harness) {
	ctx, _, sb := fresh(t, h)
	dir := workDir(t, ctx, sb)
	_, err := sb.ReadFile(ctx, dir)
	wantClass(t, "read a directory", err, sandbox.InvalidArgument)
}

func testRelativePath(t *testing.T, h Harness) {
	ctx, _, sb := fresh(t, h)
	_, err := sb.ReadFile(ctx, "relative/file")
	wantClass(t, "read a relative path", err, sandbox.InvalidArgument)
	wantClass(t, "write a relative path", sb.WriteFile(ctx, "rel", nil, 0), sandbox.InvalidArgument)
}

// tarEntry is one entry of a test archive; a name ending in "/" is a dir.
type tarEntry struct {
	name string
	mode int64
	data string
}

func makeTar(t *testing.T, entries []tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: e.mode, Typeflag: tar.TypeReg, Size: int64(len(e.data))}
		if e.name[len(e.name)-1] == '/' {
			hdr.Typeflag, hdr.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// readTar returns an archive's entries keyed by name.
func readTar(t *testing.T, r io.Reader) map[string]tarEntry {
	t.Helper()
	out := map[string]tarEntry{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("reading downloaded tar: %v", err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[hdr.Name] = tarEntry{name: hdr.Name, mode: hdr.Mode & 0o777, data: string(data)}
	}
}

func testTree(t *testing.T, h Harness) {
	ctx, _, sb := fresh(t, h)
	dir := workDir(t, ctx, sb) + "/tree"
	bin := string(randomBytes(3000, 2))
	up := []tarEntry{
		{name: "a.txt", mode: 0o644, data: "alpha"},
		{name: "sub/", mode: 0o755},
		{name: "sub/b.bin", mode: 0o755, data: bin},
		{name: "sub/deeper/", mode: 0o755},
		{name: "./c.txt", mode: 0o600, data: "dot-slash names are fine"},
	}
	if err := sb.Upload(ctx, dir, bytes.NewReader(makeTar(t, up))); err != nil {
		t.Fatalf("upload: %v", err)
	}
	if got, err := sb.ReadFile(ctx, dir+"/sub/b.bin"); err != nil || string(got) != bin {
		t.Errorf("uploaded sub/b.bin: %d bytes, %v", len(got), err)
	}
	if fi, err := sb.Stat(ctx, dir+"/sub/deeper"); err != nil || fi.Type != sandbox.FileDir {
		t.Errorf("uploaded empty dir: %+v, %v", fi, err)
	}
	rc, err := sb.Download(ctx, dir)
	if err != nil {
		t.Fatalf("download: %v", err)
	}
	got := readTar(t, rc)
	if err := rc.Close(); err != nil {
		t.Errorf("close download: %v", err)
	}
	want := map[string]string{"a.txt": "alpha", "c.txt": up[4].data, "sub/": "", "sub/b.bin": bin, "sub/deeper/": ""}
	if len(got) != len(want) {
		t.Errorf("downloaded entries %v, want %d entries", keys(got), len(want))
	}
	for name, data := range want {
		if e, ok := got[name]; !ok || e.data != data {
			t.Errorf("downloaded %q: present %v, %d bytes; want %d bytes", name, ok, len(e.data), len(data))
		}
	}
	if m := got["sub/b.bin"].mode; m != 0o755 {
		t.Errorf("sub/b.bin mode %o after the round trip, want 755", m)
	}
	// A single file downloads as one entry named by its base name.
	rc, err = sb.Download(ctx, dir+"/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	one := readTar(t, rc)
	rc.Close()
	if len(one) != 1 || one["a.txt"].data != "alpha" {
		t.Errorf("download of one file = %v, want just a.txt", keys(one))
	}
}

func keys(m map[string]tarEntry) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// testTreeEscape: an archive cannot climb out of the target directory,
// whatever path the provider takes.
func testTreeEscape(t *testing.T, h Harness) {
	ctx, _, sb := fresh(t, h)
	base := workDir(t, ctx, sb)
	dir := base + "/in"
	for _, name := range []string{"../escaped", "sub/../../escaped", "/escaped-abs"} {
		err := sb.Upload(ctx, dir, bytes.NewReader(makeTar(t, []tarEntry{{name: name, mode: 0o644, data: "x"}})))
		wantClass(t, "upload of "+name, err, sandbox.InvalidArgument)
	}
	for _, p := range []string{base + "/escaped", "/escaped-abs", dir + "/escaped-abs"} {
		if _, err := sb.Stat(ctx, p); !errorsIsNotFound(err) {
			t.Errorf("%s exists after refused uploads (stat: %v)", p, err)
		}
	}
}

func errorsIsNotFound(err error) bool { return sandbox.ClassOf(err) == sandbox.NotFound }

// testHostDirs round-trips a host directory through UploadDir and
// DownloadDir.
func testHostDirs(t *testing.T, h Harness) {
	ctx, _, sb := fresh(t, h)
	src := t.TempDir()
	files := map[string]string{"top.txt": "top", "d1/mid.txt": "mid", "d1/d2/leaf.bin": string(randomBytes(5000, 3))}
	for name, data := range files {
		p := filepath.Join(src, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(src, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := workDir(t, ctx, sb) + "/up"
	if err := sb.UploadDir(ctx, src, dir); err != nil {
		t.Fatalf("upload dir: %v", err)
	}
	dst := filepath.Join(t.TempDir(), "down")
	if err := sb.DownloadDir(ctx, dir, dst); err != nil {
		t.Fatalf("download dir: %v", err)
	}
	for name, data := range files {
		got, err := os.ReadFile(filepath.Join(dst, filepath.FromSlash(name)))
		if err != nil || string(got) != data {
			t.Errorf("%s after the round trip: %d bytes, %v; want %d bytes", name, len(got), err, len(data))
		}
	}
	if fi, err := os.Stat(filepath.Join(dst, "empty")); err != nil || !fi.IsDir() {
		t.Errorf("empty dir after the round trip: %v", err)
	}
}

// testStatSymlink: Stat describes a symlink itself, never its target,
// whether the target exists or not (the driver contract). The links are
// made by the sandbox's own ln, so every provider runs this case.
func testStatSymlink(t *testing.T, h Harness) {
	ctx, _, sb := fresh(t, h)
	dir := workDir(t, ctx, sb)
	res := run(t, ctx, sb, sandbox.Command{Args: sh("echo data > target.txt && ln -s target.txt link && ln -s missing dangling"), Dir: dir})
	if res.ExitCode != 0 {
		t.Fatalf("making links: exit %d: %s", res.ExitCode, res.Stderr)
	}
	for name, target := range map[string]string{"link": "target.txt", "dangling": "missing"} {
		fi, err := sb.Stat(ctx, dir+"/"+name)
		if err != nil {
			t.Errorf("stat %s: %v", name, err)
			continue
		}
		if fi.Type != sandbox.FileSymlink || fi.Target != target || fi.Name != name {
			t.Errorf("stat %s = %+v; want a symlink named %s to %s (not its target)", name, fi, name, target)
		}
	}
	if fi, err := sb.Stat(ctx, dir+"/target.txt"); err != nil || fi.Type != sandbox.FileRegular {
		t.Errorf("stat of the target = %+v, %v", fi, err)
	}
}

// testLinks: with Capabilities.TreeUpload symlinks travel both ways, and a
// link the archive made cannot carry a later entry out of the tree.
// Without it an archive with a link is refused as NotSupported.
func testLinks(t *testing.T, h Harness) {
	ctx, p, sb := fresh(t, h)
	dir := workDir(t, ctx, sb) + "/links"
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, hdr := range []*tar.Header{
		{Name: "target.txt", Typeflag: tar.TypeReg, Mode: 0o644, Size: 6},
		{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "target.txt"},
	} {
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Size > 0 {
			io.WriteString(tw, "target")
		}
	}
	tw.Close()
	if !p.Capabilities().TreeUpload {
		wantClass(t, "upload of a symlink without Capabilities.TreeUpload", sb.Upload(ctx, dir, &buf), sandbox.NotSupported)
		return
	}
	if err := sb.Upload(ctx, dir, &buf); err != nil {
		t.Fatalf("upload with a symlink: %v", err)
	}
	fi, err := sb.Stat(ctx, dir+"/link")
	if err != nil || fi.Type != sandbox.FileSymlink || fi.Target != "target.txt" {
		t.Errorf("stat link = %+v, %v; want a symlink to target.txt", fi, err)
	}
	rc, err := sb.Download(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	found := false
	for {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		if hdr.Name == "link" {
			found = hdr.Typeflag == tar.TypeSymlink && hdr.Linkname == "target.txt"
		}
	}
	if !found {
		t.Error("the downloaded archive has no symlink link -> target.txt")
	}

	buf.Reset()
	tw = tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "up", Typeflag: tar.TypeSymlink, Linkname: "/"})
	tw.WriteHeader(&tar.Header{Name: "up/berth-suite-through-link", Typeflag: tar.TypeReg, Mode: 0o644})
	tw.Close()
	wantClass(t, "upload through a symlink of the same archive", sb.Upload(ctx, dir+"/evil", &buf), sandbox.InvalidArgument)
	if _, err := sb.Stat(ctx, "/berth-suite-through-link"); !errorsIsNotFound(err) {
		t.Errorf("a file was written through the archive's symlink (stat: %v)", err)
	}
}
