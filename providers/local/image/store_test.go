package image

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/berth-sh/berth/internal/testing/testimage"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

func newStore(t testing.TB) *Store {
	t.Helper()
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// layerDirs lists what is in the layers directory, temporary dirs included.
func layerDirs(t testing.TB, s *Store) []string {
	t.Helper()
	ents, err := os.ReadDir(s.layersDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func wantClass(t testing.TB, err error, class errdefs.Class, mentions ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", class)
	}
	if got := errdefs.ClassOf(err); got != class {
		t.Fatalf("error class %v, want %v: %v", got, class, err)
	}
	for _, m := range mentions {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("error %q does not mention %q", err, m)
		}
	}
}

// checkBusybox asserts that img is the busybox test image, unpacked.
func checkBusybox(t *testing.T, img Image) {
	t.Helper()
	if len(img.Layers) != 1 || len(img.DiffIDs) != 1 {
		t.Fatalf("layers %v, diff IDs %v; want one", img.Layers, img.DiffIDs)
	}
	l := img.Layers[0]
	fi, err := os.Stat(filepath.Join(l, "bin/busybox"))
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("bin/busybox: %v %v", fi, err)
	}
	if target, err := os.Readlink(filepath.Join(l, "bin/sh")); err != nil || target != "busybox" {
		t.Errorf("bin/sh -> %q, %v; want busybox", target, err)
	}
	if fi, err := os.Stat(filepath.Join(l, "tmp")); err != nil || fi.Mode()&os.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
		t.Errorf("tmp: %v %v; want drwxrwxrwt", fi.Mode(), err)
	}
	passwd, err := os.ReadFile(filepath.Join(l, "etc/passwd"))
	if err != nil || !strings.Contains(string(passwd), "nobody:x:65534") {
		t.Errorf("etc/passwd: %q %v", passwd, err)
	}
	if filepath.Base(l) != strings.TrimPrefix(img.DiffIDs[0], "sha256:") {
		t.Errorf("layer dir %s is not named by diff ID %s", l, img.DiffIDs[0])
	}
}

func TestPullFromRegistry(t *testing.T) {
	ctx := context.Background()
	host := testimage.Serve(t, map[string]v1.Image{"busybox:1": testimage.Busybox(t)})
	s := newStore(t)
	ref := host + "/busybox:1"

	img, err := s.Pull(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	checkBusybox(t, img)
	if img.Ref != ref || !strings.HasPrefix(img.Digest, "sha256:") || !strings.HasPrefix(img.ID, "sha256:") {
		t.Errorf("ref %q digest %q id %q", img.Ref, img.Digest, img.ID)
	}
	if strings.Join(img.Config.Cmd, " ") != "sh" || img.Config.OS != "linux" || len(img.Config.Env) != 1 {
		t.Errorf("config %+v", img.Config)
	}

	got, err := s.Resolve(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != img.ID || got.Layers[0] != img.Layers[0] {
		t.Errorf("Resolve = %+v, Pull = %+v", got, img)
	}
	// By digest too.
	if got, err := s.Resolve(ctx, host+"/busybox@"+img.Digest); err != nil || got.ID != img.ID {
		t.Errorf("Resolve by digest: %+v, %v", got, err)
	}
	// A second store on the same state dir (another process) sees it.
	s2, err := Open(filepath.Dir(s.imagesDir), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Resolve(ctx, ref); err != nil {
		t.Errorf("second store: %v", err)
	}
}

func TestConfigCarried(t *testing.T) {
	ctx := context.Background()
	cfg := v1.Config{
		Env:        []string{"PATH=/bin", "A=b=c"},
		WorkingDir: "/work",
		User:       "1000:1000",
		Entrypoint: []string{"/bin/entry", "--flag"},
		Cmd:        []string{"serve"},
		Labels:     map[string]string{"k": "v"},
		StopSignal: "SIGINT",
	}
	host := testimage.Serve(t, map[string]v1.Image{"cfg:1": testimage.Image(t, cfg, testimage.Layer(t, E{Name: "f", Body: "x"}))})
	s := newStore(t)
	if _, err := s.Pull(ctx, host+"/cfg:1"); err != nil {
		t.Fatal(err)
	}
	img, err := s.Resolve(ctx, host+"/cfg:1") // read back from the index file
	if err != nil {
		t.Fatal(err)
	}
	c := img.Config
	if strings.Join(c.Env, ",") != "PATH=/bin,A=b=c" || c.WorkingDir != "/work" || c.User != "1000:1000" ||
		strings.Join(c.Entrypoint, " ") != "/bin/entry --flag" || strings.Join(c.Cmd, " ") != "serve" ||
		c.Labels["k"] != "v" || c.StopSignal != "SIGINT" || c.OS != "linux" || c.Architecture == "" {
		t.Errorf("config %+v does not match %+v", c, cfg)
	}
}

func TestPullUnknownImage(t *testing.T) {
	host := testimage.Serve(t, nil)
	s := newStore(t)
	_, err := s.Pull(context.Background(), host+"/nothing:here")
	wantClass(t, err, errdefs.NotFound, "nothing:here")
	if d := layerDirs(t, s); len(d) != 0 {
		t.Errorf("left behind: %v", d)
	}
}

func TestResolveUnknown(t *testing.T) {
	s := newStore(t)
	_, err := s.Resolve(context.Background(), "example.com/not/pulled:v1")
	wantClass(t, err, errdefs.NotFound, "example.com/not/pulled:v1")
	_, err = s.Resolve(context.Background(), "Bad Ref!")
	wantClass(t, err, errdefs.InvalidArgument, "Bad Ref!")
}

type countingTransport struct{ n int }

func (c *countingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	c.n++
	return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
}

func TestPlainHTTPOnlyForLoopback(t *testing.T) {
	base := &countingTransport{}
	s, err := Open(t.TempDir(), Options{Transport: base, InsecureRegistries: []string{"10.1.2.3:5000"}})
	if err != nil {
		t.Fatal(err)
	}
	for host, ok := range map[string]bool{
		"127.0.0.1:5000": true, "localhost:5000": true, "[::1]:80": true, "10.1.2.3:5000": true,
		"10.1.2.4:5000": false, "192.168.0.1": false, "registry.local": false, "example.com": false,
	} {
		before := base.n
		req, _ := http.NewRequest("GET", "http://"+host+"/v2/", nil)
		_, err := s.transport.RoundTrip(req)
		if sent := base.n > before; sent != ok || (err == nil) != ok {
			t.Errorf("plain HTTP to %s: sent %v, err %v; want sent %v", host, sent, err, ok)
		}
		if !ok {
			wantClass(t, err, errdefs.NotSupported, host)
		}
		// HTTPS always goes through.
		req, _ = http.NewRequest("GET", "https://"+host+"/v2/", nil)
		if _, err := s.transport.RoundTrip(req); err != nil {
			t.Errorf("https to %s: %v", host, err)
		}
	}
}

func TestConcurrentPullUnpacksOnce(t *testing.T) {
	ctx := context.Background()
	base := testimage.Layer(t, testimage.Entry{Name: "base/"}, testimage.Entry{Name: "base/f", Body: "base"})
	top1 := testimage.Layer(t, testimage.Entry{Name: "one", Body: "1"})
	top2 := testimage.Layer(t, testimage.Entry{Name: "two", Body: "2"})
	host := testimage.Serve(t, map[string]v1.Image{
		"a:1": testimage.Image(t, v1.Config{}, base, top1),
		"b:1": testimage.Image(t, v1.Config{}, base, top2),
	})
	s := newStore(t)
	other, err := Open(filepath.Dir(s.imagesDir), Options{}) // a second process on the same state
	if err != nil {
		t.Fatal(err)
	}

	const n = 8
	var wg sync.WaitGroup
	imgs := make([]Image, 2*n)
	errs := make([]error, 2*n)
	for i := range n {
		wg.Add(2)
		go func() { defer wg.Done(); imgs[i], errs[i] = s.Pull(ctx, host+"/a:1") }()
		go func() { defer wg.Done(); imgs[n+i], errs[n+i] = s.Pull(ctx, host+"/b:1") }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("pull %d: %v", i, err)
		}
	}
	// Three distinct layers, each unpacked exactly once for sixteen pulls.
	if got := s.unpacks.Load(); got != 3 {
		t.Errorf("unpacked %d layers, want 3", got)
	}
	if imgs[0].Layers[0] != imgs[n].Layers[0] {
		t.Errorf("base layer not shared: %s vs %s", imgs[0].Layers[0], imgs[n].Layers[0])
	}
	// The other store finds everything in place and unpacks nothing.
	if _, err := other.Pull(ctx, host+"/b:1"); err != nil {
		t.Fatal(err)
	}
	if got := other.unpacks.Load(); got != 0 {
		t.Errorf("second store unpacked %d layers, want 0", got)
	}
	if d := layerDirs(t, s); len(d) != 3 {
		t.Errorf("layers dir holds %v, want 3 layers and nothing else", d)
	}
}

func TestConcurrentUnpackAcrossStores(t *testing.T) {
	// Two stores (as two processes) race on one layer: the first rename
	// wins, the loser's copy is discarded, and both report the same dir.
	ctx := context.Background()
	host := testimage.Serve(t, map[string]v1.Image{"busybox:1": testimage.Busybox(t)})
	dir := t.TempDir()
	var stores []*Store
	for range 4 {
		s, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	var wg sync.WaitGroup
	imgs := make([]Image, len(stores))
	errs := make([]error, len(stores))
	for i, s := range stores {
		wg.Add(1)
		go func() { defer wg.Done(); imgs[i], errs[i] = s.Pull(ctx, host+"/busybox:1") }()
	}
	wg.Wait()
	for i := range stores {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		checkBusybox(t, imgs[i])
	}
	if d := layerDirs(t, stores[0]); len(d) != 1 {
		t.Errorf("layers dir holds %v, want one layer", d)
	}
}

func TestImportKinds(t *testing.T) {
	ctx := context.Background()
	bb := testimage.Busybox(t)
	rootfs := testimage.BusyboxTar(t)
	gz := filepath.Join(t.TempDir(), "rootfs.tar.gz")
	gzipFile(t, rootfs, gz)
	cases := []struct {
		name, file string
		digest     bool // the archive carries a manifest digest
	}{
		{"rootfs", rootfs, false},
		{"rootfs-gzip", gz, false},
		{"docker-save", testimage.DockerTar(t, map[string]v1.Image{"example.com/bb:save": bb}), false},
		{"oci-layout", testimage.OCILayoutTar(t, map[string]v1.Image{"example.com/bb:oci": bb}), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t)
			ref := "example.com/imported/" + c.name + ":v1"
			img, err := s.Import(ctx, ref, c.file)
			if err != nil {
				t.Fatal(err)
			}
			checkBusybox(t, img)
			if (img.Digest != "") != c.digest {
				t.Errorf("digest %q", img.Digest)
			}
			got, err := s.Resolve(ctx, ref)
			if err != nil || got.ID != img.ID {
				t.Fatalf("Resolve: %+v %v", got, err)
			}
			if c.name != "rootfs" && c.name != "rootfs-gzip" {
				want, _ := bb.ConfigName()
				if img.ID != want.String() || strings.Join(img.Config.Cmd, " ") != "sh" {
					t.Errorf("id %s cmd %v; want %s and the image's cmd", img.ID, img.Config.Cmd, want)
				}
			} else if len(img.Config.Env) != 1 || !strings.HasPrefix(img.Config.Env[0], "PATH=") {
				t.Errorf("rootfs import env %v, want a default PATH", img.Config.Env)
			}
		})
	}
}

func TestImportPicksTaggedImage(t *testing.T) {
	ctx := context.Background()
	imgs := map[string]v1.Image{}
	for _, n := range []string{"a", "b"} {
		imgs["example.com/two:"+n] = testimage.Image(t, v1.Config{Cmd: []string{n}},
			testimage.Layer(t, testimage.Entry{Name: n, Body: n}))
	}
	for kind, file := range map[string]string{
		"docker": testimage.DockerTar(t, imgs),
		"oci":    testimage.OCILayoutTar(t, imgs),
	} {
		t.Run(kind, func(t *testing.T) {
			s := newStore(t)
			for _, n := range []string{"b", "a"} {
				img, err := s.Import(ctx, "example.com/two:"+n, file)
				if err != nil {
					t.Fatal(err)
				}
				if img.Config.Cmd[0] != n {
					t.Errorf("import two:%s got the image with cmd %v", n, img.Config.Cmd)
				}
			}
			_, err := s.Import(ctx, "example.com/two:c", file)
			if errdefs.ClassOf(err) != errdefs.NotFound && errdefs.ClassOf(err) != errdefs.InvalidArgument {
				t.Errorf("import of a tag the archive lacks: %v", err)
			}
			if err == nil || !strings.Contains(err.Error(), file) {
				t.Errorf("error %v does not name the file", err)
			}
		})
	}
}

func TestImportCorrupt(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	random := filepath.Join(dir, "random.tar")
	os.WriteFile(random, bytes.Repeat([]byte("not a tar archive "), 200), 0o644)
	empty := filepath.Join(dir, "empty.tar")
	os.WriteFile(empty, nil, 0o644)
	// A real archive cut in the middle of a file.
	full, _ := os.ReadFile(testimage.BusyboxTar(t))
	truncated := filepath.Join(dir, "truncated.tar")
	os.WriteFile(truncated, full[:len(full)/2], 0o644)
	// A docker-save archive cut short, then compressed.
	docker := mustRead(t, testimage.DockerTar(t, map[string]v1.Image{"x:y": testimage.Busybox(t)}))
	truncDocker := filepath.Join(dir, "truncated-docker.tar.gz")
	gzipBytes(t, docker[:len(docker)*2/3], truncDocker)
	// A gzip stream cut short.
	gzipBytes(t, full, filepath.Join(dir, "whole.tar.gz"))
	gz := mustRead(t, filepath.Join(dir, "whole.tar.gz"))
	badGzip := filepath.Join(dir, "cut.tar.gz")
	os.WriteFile(badGzip, gz[:len(gz)-100], 0o644)

	for _, file := range []string{random, empty, truncated, truncDocker, badGzip} {
		t.Run(filepath.Base(file), func(t *testing.T) {
			s := newStore(t)
			_, err := s.Import(ctx, "example.com/corrupt:v1", file)
			wantClass(t, err, errdefs.InvalidArgument, file)
			if d := layerDirs(t, s); len(d) != 0 {
				t.Errorf("left behind: %v", d)
			}
			if l, _ := s.List(ctx); len(l) != 0 {
				t.Errorf("index holds %v", l)
			}
		})
	}
	s := newStore(t)
	_, err := s.Import(ctx, "example.com/missing:v1", filepath.Join(dir, "no-such.tar"))
	wantClass(t, err, errdefs.NotFound, "no-such.tar")
}

func TestPullLayerNotMatchingDiffID(t *testing.T) {
	// A registry (or an archive) that claims one diff ID and serves other
	// content must not poison the shared layer cache.
	ctx := context.Background()
	img := testimage.Image(t, v1.Config{}, testimage.Layer(t, testimage.Entry{Name: "f", Body: "real"}))
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.RootFS.DiffIDs[0] = v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("ab", 32)}
	lying, err := mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	host := testimage.Serve(t, map[string]v1.Image{"liar:1": lying})
	s := newStore(t)
	_, err = s.Pull(ctx, host+"/liar:1")
	wantClass(t, err, errdefs.InvalidArgument, "liar:1", strings.Repeat("ab", 32))
	if d := layerDirs(t, s); len(d) != 0 {
		t.Errorf("left behind: %v", d)
	}
}

func TestListAndRemove(t *testing.T) {
	ctx := context.Background()
	base := testimage.Layer(t, testimage.Entry{Name: "base", Body: "b"})
	host := testimage.Serve(t, map[string]v1.Image{
		"a:1": testimage.Image(t, v1.Config{}, base, testimage.Layer(t, testimage.Entry{Name: "a", Body: "a"})),
		"b:1": testimage.Image(t, v1.Config{}, base, testimage.Layer(t, testimage.Entry{Name: "b", Body: "b"})),
	})
	s := newStore(t)
	a, err := s.Pull(ctx, host+"/a:1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Pull(ctx, host+"/b:1")
	if err != nil {
		t.Fatal(err)
	}
	list, err := s.List(ctx)
	if err != nil || len(list) != 2 || list[0].Ref != a.Ref || list[1].Ref != b.Ref || len(list[1].Layers) != 2 {
		t.Fatalf("List = %+v, %v", list, err)
	}

	if err := s.Remove(ctx, host+"/a:1"); err != nil {
		t.Fatal(err)
	}
	// a's own layer is gone; the base, still used by b, stays.
	if _, err := os.Stat(a.Layers[1]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a's top layer still there: %v", err)
	}
	if _, err := os.Stat(a.Layers[0]); err != nil {
		t.Errorf("shared base layer removed: %v", err)
	}
	_, err = s.Resolve(ctx, host+"/a:1")
	wantClass(t, err, errdefs.NotFound, "a:1")
	wantClass(t, s.Remove(ctx, host+"/a:1"), errdefs.NotFound, "a:1")
	if _, err := s.Resolve(ctx, host+"/b:1"); err != nil {
		t.Errorf("b after removing a: %v", err)
	}

	if err := s.Remove(ctx, host+"/b:1"); err != nil {
		t.Fatal(err)
	}
	if d := layerDirs(t, s); len(d) != 0 {
		t.Errorf("layers left after removing every image: %v", d)
	}
	if list, _ := s.List(ctx); len(list) != 0 {
		t.Errorf("List after removing all = %v", list)
	}
}

func TestPullRepairsMissingLayer(t *testing.T) {
	ctx := context.Background()
	host := testimage.Serve(t, map[string]v1.Image{"busybox:1": testimage.Busybox(t)})
	s := newStore(t)
	img, err := s.Pull(ctx, host+"/busybox:1")
	if err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(img.Layers[0])
	_, err = s.Resolve(ctx, host+"/busybox:1")
	wantClass(t, err, errdefs.NotFound, img.DiffIDs[0])
	if img, err = s.Pull(ctx, host+"/busybox:1"); err != nil {
		t.Fatal(err)
	}
	checkBusybox(t, img)
}

func mustRead(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func gzipFile(t testing.TB, src, dst string) { gzipBytes(t, mustRead(t, src), dst) }

func gzipBytes(t testing.TB, b []byte, dst string) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	if err := os.WriteFile(dst, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPullRegistry500IsNotRetriedAbove: a registry that answers 500 is
// retried by go-containerregistry's transport (three tries), and what
// reaches the caller is classed by the one HTTP table: Unknown, not
// retryable, so a create gate above does not pull the failing registry
// eight more times. On c83d05d pull.go had a table of its own that read
// every 5xx as Unavailable (checked there: class Unavailable, retryable).
func TestPullRegistry500IsNotRetriedAbove(t *testing.T) {
	var mu sync.Mutex
	manifests := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			w.WriteHeader(http.StatusOK)
			return
		}
		if strings.Contains(r.URL.Path, "/manifests/") {
			mu.Lock()
			manifests++
			mu.Unlock()
		}
		http.Error(w, "internal error", http.StatusInternalServerError)
	}))
	defer srv.Close()
	s := newStore(t)
	_, err := s.Pull(context.Background(), strings.TrimPrefix(srv.URL, "http://")+"/broken:1")
	wantClass(t, err, errdefs.Unknown, "broken:1")
	if errdefs.Retryable(err) {
		t.Errorf("a registry's persistent 500 is retryable: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if manifests < 2 {
		t.Errorf("the registry saw %d manifest requests: the transport did not retry the 500", manifests)
	}
}
