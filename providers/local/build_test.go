package local_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/syncbuf"

	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/providers/local/image"
	"github.com/berth-sh/berth/providers/local/imagebuild"
	"github.com/berth-sh/berth/sandbox"
)

// buildProvider opens the provider through the sandbox API with its log in
// a buffer.
func buildProvider(t *testing.T) (*sandbox.Provider, *syncbuf.Buffer) {
	t.Helper()
	needRoot(t)
	logs := &syncbuf.Buffer{}
	o := options()
	o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	_, pooled := pooledTests.Load(t)
	if pooled {
		o.Pool = local.Pool{Size: 1}
	}
	d, err := local.New(o)
	if err != nil {
		t.Fatal(err)
	}
	p := sandbox.NewProvider("local", d)
	t.Cleanup(func() { p.Close() })
	if pooled {
		warm(t, d, sandbox.Spec{Image: local.DefaultImage})
		t.Cleanup(func() {
			if local.PoolHanded(d) == 0 {
				t.Errorf("no sandbox came from the pool: the test proves nothing about pooled ones")
			}
		})
	}
	return p, logs
}

// A build whose sandbox comes from the pool (its root switched to the base
// image at Create) commits the same layer: the image's files, none of the
// mount points.
func TestBuildDockerfilePooled(t *testing.T) {
	pooledTests.Store(t, []sandbox.Spec(nil))
	defer pooledTests.Delete(t)
	TestBuildDockerfile(t)
}

// writeContext writes files (path -> body; a body starting with "->" makes
// a symlink) into a new build context directory.
func writeContext(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ctx")
	for p, body := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(body, "->"); ok {
			if err := os.Symlink(target, full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// tarGz is a gzip-compressed tar with a file owned by uid 1234, mode 0600,
// a directory and a symlink.
func tarGz(t *testing.T) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	now := time.Unix(1700000000, 0)
	for _, h := range []*tar.Header{
		{Name: "x/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: now},
		{Name: "x/y.txt", Typeflag: tar.TypeReg, Mode: 0o600, Uid: 1234, Gid: 1234, Size: 8, ModTime: now},
		{Name: "x/y.link", Typeflag: tar.TypeSymlink, Linkname: "y.txt", Mode: 0o777, ModTime: now},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte("from-tar"))
		}
	}
	tw.Close()
	zw.Close()
	return buf.String()
}

const fullDockerfile = `ARG BASE=berth.local/busybox:latest
FROM ${BASE}
ARG FLAVOR=plain
ARG OVERRIDE=default
ENV APP_HOME=/app PATH=/app/bin:$PATH
WORKDIR $APP_HOME
RUN echo "flavor=$FLAVOR override=$OVERRIDE home=$APP_HOME pwd=$(pwd)" > /built.txt && \
    mkdir -p bin && printf '#!/bin/sh\necho tool-ran\n' > bin/tool && chmod 755 bin/tool && \
    rm /bin/vi
COPY --chmod=640 conf.txt /etc/app/conf.txt
COPY --chown=nobody:nogroup --chmod=750 data/ ./data/
ADD files.tar.gz /opt/
ADD plain.txt /opt/plain.txt
USER nobody
RUN id -u > /tmp/uid.txt && echo "arg=$FLAVOR" >> /tmp/uid.txt
`

func fullContext(t *testing.T) string {
	return writeContext(t, map[string]string{
		"Dockerfile":      fullDockerfile,
		"conf.txt":        "conf\n",
		"data/a.txt":      "a\n",
		"data/sub/b.txt":  "b\n",
		"data/link":       "->a.txt",
		"files.tar.gz":    tarGz(t),
		"plain.txt":       "plain\n",
		"ignored-by-copy": "never copied, never hashed\n",
	})
}

// A Dockerfile of every supported instruction builds, and a sandbox of the
// result sees all of it; the second build of the same input is a cache hit
// that starts no sandbox, and changing one context file builds again.
func TestBuildDockerfile(t *testing.T) {
	p, logs := buildProvider(t)
	ctx := testCtx(t)
	st := buildStore(t)
	dir := fullContext(t)
	spec := sandbox.Spec{Build: &sandbox.Build{ContextDir: dir, Args: map[string]string{"OVERRIDE": "given"}}}

	before := local.BuildSandboxes()
	start := time.Now()
	if err := p.PrepareImage(ctx, spec); err != nil {
		t.Fatalf("build: %v\nlogs:\n%s", err, logs)
	}
	first := time.Since(start)
	if n := local.BuildSandboxes() - before; n != 1 {
		t.Fatalf("first build started %d sandboxes, want 1", n)
	}

	start = time.Now()
	sb := createBuilt(t, p, spec) // Create builds too: here a cache hit
	hit := time.Since(start)
	if n := local.BuildSandboxes() - before; n != 1 {
		t.Fatalf("create after the build started %d more build sandboxes", n-1)
	}
	if !strings.Contains(logs.String(), "image build cache hit") {
		t.Errorf("no cache-hit log line:\n%s", logs)
	}
	t.Logf("first build %v; create from the cache (hit + sandbox) %v", first.Round(time.Millisecond), hit.Round(time.Millisecond))

	// As the image's user (USER nobody), then as root for what only root
	// may read.
	for _, c := range []struct{ user, script, want string }{
		{"", "cat /built.txt", "flavor=plain override=given home=/app pwd=/app"},
		{"", "tool", "tool-ran"},                  // ENV PATH, extended from the base's
		{"", "pwd", "/app"},                       // WORKDIR
		{"", "id -u", "65534"},                    // USER
		{"", "echo $APP_HOME-$FLAVOR.", "/app-."}, // ENV kept, ARG not
		{"", "cat /tmp/uid.txt", "65534\narg=plain"},
		{"", "stat -c '%a %U %G' /app/data /app/data/a.txt /app/data/sub/b.txt", "750 nobody nogroup\n750 nobody nogroup\n750 nobody nogroup"},
		{"", "readlink /app/data/link; cat /app/data/sub/b.txt", "a.txt\nb"},
		{"", "cat /opt/plain.txt", "plain"},
		{"", "test -e /bin/vi && echo vi-present || echo vi-gone", "vi-gone"},
		{"", "test -e /opt/files.tar.gz || echo no-archive-copy", "no-archive-copy"},
		{"root", "stat -c '%a %u %g' /etc/app/conf.txt; cat /etc/app/conf.txt", "640 0 0\nconf"},
		{"root", "stat -c '%a %u' /opt/x/y.txt; cat /opt/x/y.txt; echo; readlink /opt/x/y.link", "600 1234\nfrom-tar\ny.txt"},
	} {
		res, err := sb.Run(ctx, sandbox.Command{Args: []string{"sh", "-c", c.script}, User: c.user})
		if err != nil || res.ExitCode != 0 {
			t.Errorf("%s: exit %d %v: %s", c.script, res.ExitCode, err, res.Stderr)
			continue
		}
		if got := strings.TrimSpace(string(res.Stdout)); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.script, got, c.want)
		}
	}

	// The stored image holds a proper layer: none of the sandbox's own
	// mount points, and the final config.
	imgs, err := st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var built *image.Image
	for i := range imgs {
		if strings.HasPrefix(imgs[i].Ref, imagebuild.Repository+"/") && strings.Contains(imgs[i].Ref, "/ctx:") {
			built = &imgs[i]
		}
	}
	if built == nil {
		t.Fatalf("no built image in %v", imgs)
	}
	if built.Config.User != "nobody" || built.Config.WorkingDir != "/app" {
		t.Errorf("config %+v", built.Config)
	}
	top := built.Layers[len(built.Layers)-1]
	for _, p := range []string{".berth", "etc/hosts", "etc/resolv.conf"} {
		if _, err := os.Lstat(filepath.Join(top, p)); err == nil {
			t.Errorf("the built layer holds the sandbox's %s", p)
		}
	}

	// Again: a cache hit, no sandbox.
	start = time.Now()
	if err := p.PrepareImage(ctx, spec); err != nil {
		t.Fatal(err)
	}
	t.Logf("cache hit: %v", time.Since(start).Round(time.Microsecond))
	if n := local.BuildSandboxes() - before; n != 1 {
		t.Errorf("a cache hit started a build sandbox")
	}

	// A context file that is not copied does not matter; one that is does.
	if err := os.WriteFile(filepath.Join(dir, "ignored-by-copy"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.PrepareImage(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if n := local.BuildSandboxes() - before; n != 1 {
		t.Errorf("changing a file no COPY names rebuilt the image")
	}
	if err := os.WriteFile(filepath.Join(dir, "data/sub/b.txt"), []byte("b2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.PrepareImage(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if n := local.BuildSandboxes() - before; n != 2 {
		t.Errorf("changing a copied file: %d build sandboxes, want 2", n)
	}
	sb2 := createBuilt(t, p, spec)
	if got := sh(t, sb2, "cat /app/data/sub/b.txt"); got != "b2" {
		t.Errorf("rebuilt image has b.txt %q", got)
	}
}

// createBuilt makes a sandbox of a Spec with a Build, deleted at the end.
func createBuilt(t *testing.T, p *sandbox.Provider, spec sandbox.Spec) *sandbox.Sandbox {
	t.Helper()
	sb, err := p.Create(testCtx(t), spec)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Delete(context.Background(), sb.ID()); err != nil {
			t.Errorf("delete %s: %v", sb.ID(), err)
		}
		sb.Close()
	})
	return sb
}

// buildStore opens the tests' image store and removes the images a test
// built when it ends, after its sandboxes (cleanups run last-in first-out).
func buildStore(t *testing.T) *image.Store {
	t.Helper()
	st, err := image.Open(stateDir, image.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeBuiltImages(t) })
	return st
}

// removeBuiltImages removes every built image from the tests' store.
func removeBuiltImages(t testing.TB) {
	st, err := image.Open(stateDir, image.Options{})
	if err != nil {
		t.Error(err)
		return
	}
	imgs, _ := st.List(context.Background())
	for _, img := range imgs {
		if strings.HasPrefix(img.Ref, imagebuild.Repository+"/") {
			if err := st.Remove(context.Background(), img.Ref); err != nil {
				t.Errorf("remove %s: %v", img.Ref, err)
			}
		}
	}
}

// Builds that cannot be done fail with the Dockerfile's line and a class
// the runner reports (NotSupported or InvalidArgument); those refused by
// reading the Dockerfile or the context start no sandbox, and none leaves
// one behind.
func TestBuildFailures(t *testing.T) {
	p, _ := buildProvider(t)
	buildStore(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const from = "FROM berth.local/busybox:latest\n"
	cases := []struct {
		name       string
		files      map[string]string
		class      sandbox.Class
		mentions   []string
		startsOne  bool
		notMention string
	}{
		{name: "unsupported instruction", files: map[string]string{"Dockerfile": from + "RUN true\nSTOPSIGNAL 9\nFROBNICATE now\n"},
			class: sandbox.NotSupported, mentions: []string{"Dockerfile:4", "FROBNICATE"}},
		{name: "multi-stage", files: map[string]string{"Dockerfile": from + "COPY --from=builder /a /b\n"},
			class: sandbox.NotSupported, mentions: []string{"Dockerfile:2", "--from"}},
		{name: "unsupported flag", files: map[string]string{"Dockerfile": from + "COPY --link a /a\n", "a": "a"},
			class: sandbox.NotSupported, mentions: []string{"Dockerfile:2", "--link"}},
		{name: "failing RUN", files: map[string]string{"Dockerfile": from + "RUN echo first-line\nRUN echo progress; echo 'it broke' >&2; exit 3\nRUN echo never\n"},
			class: sandbox.InvalidArgument, mentions: []string{"Dockerfile:3", "exit status 3", "progress", "it broke"}, notMention: "never", startsOne: true},
		// As in Docker, ../secret is the context's own secret (here none):
		// a path from the context's root, never the directory above it.
		{name: "COPY climbing out", files: map[string]string{"Dockerfile": from + "COPY ../secret /x\n"},
			class: sandbox.InvalidArgument, mentions: []string{"Dockerfile:2", "secret: no such file in the build context"}, notMention: "host secret"},
		{name: "COPY through a symlink out", files: map[string]string{"Dockerfile": from + "COPY esc/secret /x\n", "esc": "->" + outside},
			class: sandbox.InvalidArgument, mentions: []string{"Dockerfile:2", "esc/secret"}, notMention: "host secret"},
		{name: "COPY of a tree with a link out", files: map[string]string{"Dockerfile": from + "COPY data /d\n", "data/ok": "ok", "data/out": "->" + filepath.Join(outside, "secret")},
			class: sandbox.InvalidArgument, mentions: []string{"Dockerfile:2", "data/out", "points outside the build context"}},
		{name: "COPY of a missing file", files: map[string]string{"Dockerfile": from + "COPY nothing /x\n"},
			class: sandbox.InvalidArgument, mentions: []string{"Dockerfile:2", "nothing"}},
		{name: "no Dockerfile", files: map[string]string{"other": "x"},
			class: sandbox.InvalidArgument, mentions: []string{"no Dockerfile"}},
		{name: "RUN as a user without a passwd entry", files: map[string]string{"Dockerfile": from + "USER 4242\nRUN true\n"},
			class: sandbox.NotSupported, mentions: []string{"Dockerfile:3", "4242"}, startsOne: true},
		{name: "bad chmod", files: map[string]string{"Dockerfile": from + "COPY --chmod=rwx a /a\n", "a": "a"},
			class: sandbox.InvalidArgument, mentions: []string{"Dockerfile:2", "--chmod=rwx"}, startsOne: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := local.BuildSandboxes()
			spec := sandbox.Spec{Build: &sandbox.Build{ContextDir: writeContext(t, c.files)}}
			err := p.PrepareImage(testCtx(t), spec)
			if err == nil {
				t.Fatal("the build succeeded")
			}
			t.Logf("%v", err)
			if got := sandbox.ClassOf(err); got != c.class {
				t.Errorf("class %v, want %v: %v", got, c.class, err)
			}
			for _, m := range c.mentions {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error does not mention %q: %v", m, err)
				}
			}
			if c.notMention != "" && strings.Contains(err.Error(), c.notMention) {
				t.Errorf("error mentions %q: %v", c.notMention, err)
			}
			if started := local.BuildSandboxes() - before; started != map[bool]int64{true: 1}[c.startsOne] {
				t.Errorf("%d build sandboxes started", started)
			}
			infos, err := p.List(testCtx(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(infos) != 0 {
				t.Errorf("sandboxes left after a failed build: %v", infos)
			}
		})
	}
}

// Concurrent builds of one input build once: the others wait for the
// lock and find the image.
func TestBuildConcurrentOnce(t *testing.T) {
	p, _ := buildProvider(t)
	buildStore(t)
	dir := writeContext(t, map[string]string{"Dockerfile": "FROM berth.local/busybox:latest\nRUN echo once > /once\n"})
	spec := sandbox.Spec{Build: &sandbox.Build{ContextDir: dir}}
	before := local.BuildSandboxes()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = p.PrepareImage(testCtx(t), spec) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := local.BuildSandboxes() - before; n != 1 {
		t.Errorf("%d build sandboxes for one input, want 1", n)
	}
}

// RUN steps get the Spec's network: loopback alone for none, an outside
// interface for public.
func TestBuildNetwork(t *testing.T) {
	p, _ := buildProvider(t)
	buildStore(t)
	dir := writeContext(t, map[string]string{"Dockerfile": "FROM berth.local/busybox:latest\nARG MODE\nRUN ls /sys/class/net | tr '\\n' ' ' > /nets\n"})
	for _, mode := range []sandbox.NetworkMode{sandbox.NetworkNone, sandbox.NetworkPublic} {
		// The mode is no part of the key: a build arg keeps the two apart.
		spec := sandbox.Spec{
			Build:   &sandbox.Build{ContextDir: dir, Args: map[string]string{"MODE": string(mode)}},
			Network: sandbox.Network{Mode: mode},
		}
		sb := createBuilt(t, p, spec)
		nets := sh(t, sb, "cat /nets")
		if got := strings.Fields(nets); mode == sandbox.NetworkNone && (len(got) != 1 || got[0] != "lo") {
			t.Errorf("build with network none saw interfaces %q", nets)
		} else if mode == sandbox.NetworkPublic && len(got) < 2 {
			t.Errorf("build with network public saw interfaces %q", nets)
		}
	}
}

// A build given up half way (its context ends during a RUN) fails and
// leaves no sandbox and no image.
func TestBuildCancelled(t *testing.T) {
	p, _ := buildProvider(t)
	st := buildStore(t)
	dir := writeContext(t, map[string]string{"Dockerfile": "FROM berth.local/busybox:latest\nRUN sleep 60\n"})
	ctx, cancel := context.WithTimeout(testCtx(t), 2*time.Second)
	defer cancel()
	err := p.PrepareImage(ctx, sandbox.Spec{Build: &sandbox.Build{ContextDir: dir}})
	if err == nil {
		t.Fatal("a build of sleep 60 finished in 2s")
	}
	if infos, _ := p.List(testCtx(t), nil); len(infos) != 0 {
		t.Errorf("sandboxes left: %v", infos)
	}
	imgs, _ := st.List(testCtx(t))
	for _, img := range imgs {
		if strings.HasPrefix(img.Ref, imagebuild.Repository+"/") {
			t.Errorf("image %s stored by a cancelled build", img.Ref)
		}
	}
}

// A Dockerfile that changes only the config builds without a sandbox: the
// image is the base's layers with the new config.
func TestBuildConfigOnly(t *testing.T) {
	p, _ := buildProvider(t)
	buildStore(t)
	dir := writeContext(t, map[string]string{"Dockerfile": "FROM berth.local/busybox:latest\nARG V=1\nENV A=$V\nUSER nobody\n"})
	before := local.BuildSandboxes()
	sb := createBuilt(t, p, sandbox.Spec{Build: &sandbox.Build{ContextDir: dir}})
	if n := local.BuildSandboxes() - before; n != 0 {
		t.Errorf("a config-only build started %d sandboxes", n)
	}
	if got := sh(t, sb, "echo $A $(id -u)"); got != "1 65534" {
		t.Errorf("config-only image: %q, want %q", got, "1 65534")
	}
}
