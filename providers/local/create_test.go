package local_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/internal/testing/testbin"
	"github.com/berth-sh/berth/internal/testing/testimage"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/providers/local/image"
	"github.com/berth-sh/berth/providers/local/image/seed"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// create makes a sandbox through the sandbox API and deletes it at the end.
func create(t *testing.T, p *sandbox.Provider, spec sandbox.Spec) *sandbox.Sandbox {
	t.Helper()
	if spec.Image == "" {
		spec.Image = local.DefaultImage
	}
	sb, err := p.Create(testCtx(t), spec)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Delete(context.Background(), sb.ID()); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("delete %s: %v", sb.ID(), err)
		}
		sb.Close()
	})
	return sb
}

func sh(t *testing.T, sb *sandbox.Sandbox, script string) string {
	t.Helper()
	res, err := sb.Run(testCtx(t), sandbox.Command{Args: []string{"sh", "-c", script}})
	if err != nil {
		t.Fatalf("run %q: %v", script, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("run %q: exit %d: %s", script, res.ExitCode, res.Stderr)
	}
	return strings.TrimSpace(string(res.Stdout))
}

func sandboxDirs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(stateDir, "sandboxes"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return len(ents)
}

// The Spec reaches the sandbox: env over the image's, the working
// directory, the user (commands run as it; the agent stays root so a
// command may name another), and the limits as cgroup values.
func TestSpecReachesSandbox(t *testing.T) {
	p := openProvider(t)
	sb := create(t, p, sandbox.Spec{
		Env:       map[string]string{"GREETING": "hi", "PATH": "/bin:/usr/bin"},
		WorkDir:   "/work/dir",
		User:      "nobody",
		Resources: sandbox.Resources{CPUs: 0.5, MemoryMB: 256},
	})
	if got := sh(t, sb, `echo "$GREETING $PATH $(pwd) $(id -u):$(id -g)"`); got != "hi /bin:/usr/bin /work/dir 65534:65534" {
		t.Errorf("env, cwd and user = %q", got)
	}
	res, err := sb.Run(testCtx(t), sandbox.Command{Args: []string{"id", "-u"}, User: "root"})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "0" {
		t.Errorf("command as root: %q %v", res.Stdout, err)
	}
	// The sandbox sees no cgroup file system; read its limits on the host.
	assertLimits(t, sb.ID(), 256)
}

// Bad input is refused with its class before anything is made.
func TestCreateRefusals(t *testing.T) {
	p := openProvider(t)
	registry := testimage.Serve(t, map[string]v1.Image{})
	before := sandboxDirs(t)
	for _, tt := range []struct {
		name  string
		spec  sandbox.Spec
		class sandbox.Class
		say   string
	}{
		{"unknown image", sandbox.Spec{Image: registry + "/no/such:1"}, sandbox.NotFound, registry + "/no/such:1"},
		{"more memory than the host", sandbox.Spec{Image: local.DefaultImage, Resources: sandbox.Resources{MemoryMB: 1 << 30}}, sandbox.InvalidArgument, "this host has"},
		{"more cpus than the host", sandbox.Spec{Image: local.DefaultImage, Resources: sandbox.Resources{CPUs: 4096}}, sandbox.InvalidArgument, "cpus asked"},
		{"unknown user", sandbox.Spec{Image: local.DefaultImage, User: "alice"}, sandbox.InvalidArgument, `user "alice" is not in the image's /etc/passwd`},
		{"relative workdir", sandbox.Spec{Image: local.DefaultImage, WorkDir: "work"}, sandbox.InvalidArgument, "not absolute"},
		{"allowlist", sandbox.Spec{Image: local.DefaultImage, Network: sandbox.Network{Mode: sandbox.NetworkAllowlist, Allow: []string{"example.com"}}}, sandbox.NotSupported, "allowlist"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := p.Create(testCtx(t), tt.spec)
			if sandbox.ClassOf(err) != tt.class || !strings.Contains(err.Error(), tt.say) {
				t.Errorf("create: %v (class %v); want %v saying %q", err, sandbox.ClassOf(err), tt.class, tt.say)
			}
		})
	}
	if after := sandboxDirs(t); after != before {
		t.Errorf("refused creates left %d sandbox dirs", after-before)
	}
}

// An agent binary that is not an executable is refused before anything
// is made, with the variable that names it.
func TestBadAgentRefused(t *testing.T) {
	needRoot(t)
	script := filepath.Join(t.TempDir(), "berth")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, bin := range []string{script, "/no/such/berth"} {
		o := options()
		o.AgentBinary = bin
		d, err := local.New(o)
		if err != nil {
			t.Fatal(err)
		}
		before := sandboxDirs(t)
		_, err = sandbox.NewProvider("local", d).Create(testCtx(t), sandbox.Spec{Image: local.DefaultImage})
		if sandbox.ClassOf(err) != sandbox.InvalidArgument || !strings.Contains(err.Error(), bin) {
			t.Errorf("create with agent %s: %v", bin, err)
		}
		if sandboxDirs(t) != before {
			t.Error("a refused create left a sandbox dir")
		}
	}
}

// berth-agent built the default way (`go build`, linked against the host's libc
// where cgo is available) is a working agent in an image without a libc:
// it runs through the host's loader, mounted beside it. Trees, which that
// agent moves itself, arrive as the sandbox's user.
func TestDynamicAgent(t *testing.T) {
	needRoot(t)
	bin, err := testbin.AgentDefault()
	if err != nil {
		t.Fatal(err)
	}
	if static, err := seed.IsStatic(bin); err != nil || static {
		t.Skipf("go build links berth-agent statically here (no C compiler, or CGO_ENABLED=0): nothing to test (%v)", err)
	}
	o := options()
	o.AgentBinary = bin
	o.Pool = local.Pool{Size: 1}
	d, err := local.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	p := sandbox.NewProvider("local", d)
	// The seeded default image carries bash and its libc; this image has
	// no libc at all, so only the host's loader can run the agent. The
	// second sandbox comes from the pool: the loader and its libraries
	// move into the image's root with the agent.
	ref := importBare(t)
	for i := range 2 {
		if i == 1 {
			if _, err := local.PoolReady(testCtx(t), d); err != nil {
				t.Fatal(err)
			}
		}
		sb := create(t, p, sandbox.Spec{Image: ref, User: "nobody"})
		if got := sh(t, sb, "ls /lib /lib64 2>&1; id -u"); !strings.HasSuffix(got, "65534") || !strings.Contains(got, "No such file") {
			t.Errorf("the image has no /lib and commands run as nobody: %q", got)
		}
		src := t.TempDir()
		os.WriteFile(filepath.Join(src, "a.txt"), []byte("alpha\n"), 0o644)
		os.Symlink("a.txt", filepath.Join(src, "link"))
		if err := sb.UploadDir(testCtx(t), src, "/tmp/up"); err != nil {
			t.Fatalf("upload through the dynamic agent: %v", err)
		}
		if got := sh(t, sb, "cat /tmp/up/link; stat -c %U /tmp/up/a.txt"); got != "alpha\nnobody" {
			t.Errorf("uploaded tree: %q", got)
		}
	}
	if n := local.PoolHanded(d); n != 1 {
		t.Errorf("%d sandboxes came from the pool, want 1", n)
	}
}

// importBare imports an image of busybox alone (no libc, no /lib) into the
// tests' store and returns its reference.
func importBare(t *testing.T) string {
	t.Helper()
	var bare bytes.Buffer
	if err := seed.BareBusyboxTar(&bare, ""); err != nil {
		t.Skip(err)
	}
	tarPath := filepath.Join(t.TempDir(), "bare.tar")
	if err := os.WriteFile(tarPath, bare.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	store, err := image.Open(stateDir, image.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const ref = "test.local/bare:1"
	if _, err := store.Import(testCtx(t), ref, tarPath); err != nil {
		t.Fatal(err)
	}
	return ref
}

// loggedProvider opens a provider on the shared state dir whose log (info
// and up) is the returned buffer.
func loggedProvider(t *testing.T) (*sandbox.Provider, *bytes.Buffer) {
	t.Helper()
	logs := &bytes.Buffer{}
	o := options()
	o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	d, err := local.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return sandbox.NewProvider("local", d), logs
}

// An image absent from the store is pulled from its registry (a loopback
// one, over plain HTTP) on Create, with a log line.
func TestPullOnCreate(t *testing.T) {
	needRoot(t)
	host := testimage.Serve(t, map[string]v1.Image{"tools/busybox:1": testimage.Busybox(t)})
	p, logs := loggedProvider(t)
	ref := host + "/tools/busybox:1"
	sb := create(t, p, sandbox.Spec{Image: ref})
	if got := sh(t, sb, "echo pulled"); got != "pulled" {
		t.Errorf("exec in the pulled image: %q", got)
	}
	if !strings.Contains(logs.String(), "pulling image") || !strings.Contains(logs.String(), ref) {
		t.Errorf("log does not say it pulled %s:\n%s", ref, logs.String())
	}
	infos, err := p.List(testCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		if in.ID == sb.ID() && in.Image != ref {
			t.Errorf("listed image %q, want %q", in.Image, ref)
		}
	}
}

// PrepareImage seeds the default image offline from the host's busybox on
// an empty state dir, saying so in one Info line, and only once.
func TestPrepareImageSeeds(t *testing.T) {
	needRoot(t)
	dir, err := os.MkdirTemp("", "berth-seed-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	var logs bytes.Buffer
	o := options()
	o.StateDir = dir
	o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	d, err := local.New(o)
	if err != nil {
		t.Fatal(err)
	}
	p := sandbox.NewProvider("local", d)
	spec := sandbox.Spec{Image: local.DefaultImage}
	if err := p.PrepareImage(testCtx(t), spec); err != nil {
		t.Fatal(err)
	}
	want := "seeding image berth.local/busybox:latest offline from the host's /bin/busybox (Debian busybox-static)"
	if strings.Count(logs.String(), "level=INFO") != 1 || !strings.Contains(logs.String(), want) {
		t.Errorf("log:\n%s\nwant one Info line saying %q", logs.String(), want)
	}
	if err := p.PrepareImage(testCtx(t), spec); err != nil {
		t.Fatal(err)
	}
	if strings.Count(logs.String(), "seeding") != 1 {
		t.Errorf("seeded twice:\n%s", logs.String())
	}
	s, err := image.Open(dir, image.Options{})
	if err != nil {
		t.Fatal(err)
	}
	img, err := s.Resolve(testCtx(t), local.DefaultImage)
	if err != nil || len(img.Layers) != 1 {
		t.Fatalf("seeded image: %+v, %v", img, err)
	}
	if _, err := os.Stat(filepath.Join(img.Layers[0], "bin", "sh")); err != nil {
		t.Errorf("seeded image has no /bin/sh: %v", err)
	}
}

// The agent's socket answers only with the sandbox's token, and the token
// is nowhere a process in the sandbox can read it: not in PID 1's argv or
// environment, not in a file.
func TestTokenStaysOutside(t *testing.T) {
	p := openProvider(t)
	sb := create(t, p, sandbox.Spec{})
	dir := filepath.Join(stateDir, "sandboxes", sb.ID())
	var m struct{ Token, Socket string }
	b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &m); err != nil || len(m.Token) < 32 {
		t.Fatalf("meta.json: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "meta.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("meta.json mode %v (%v), want 0600: it holds the token", fi.Mode(), err)
	}
	c, err := envd.NewClient(envd.UnixBaseURL, envd.UnixHTTPClient(m.Socket))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Stat(testCtx(t), "/")
	if sandbox.ClassOf(err) != sandbox.Unauthenticated {
		t.Errorf("envd call without the token: %v, want Unauthenticated", err)
	}
	// (PID 1 is non-dumpable: its environ is not even readable.)
	if out := sh(t, sb, "cat /proc/1/cmdline /proc/self/environ; cat /proc/1/environ 2>/dev/null; true"); strings.Contains(out, m.Token) {
		t.Errorf("the token is in PID 1's argv or environment:\n%s", out)
	}
	res, err := sb.Run(testCtx(t), sandbox.Command{Args: []string{"grep", "-rl", m.Token, "/etc", "/tmp", "/root", "/.berth"}})
	if err != nil || res.ExitCode != 1 {
		t.Errorf("grep for the token in the sandbox's files: exit %d, %v, found %q", res.ExitCode, err, res.Stdout)
	}
}

// Delete survives a cancelled context; then the sandbox is gone for every
// provider value.
func TestDeleteCancelled(t *testing.T) {
	p := openProvider(t)
	sb := create(t, p, sandbox.Spec{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Delete(ctx, sb.ID()); err != nil {
		t.Fatalf("delete with a cancelled context: %v", err)
	}
	assertNoLeftovers(t, sb.ID())
	if _, err := openProvider(t).Connect(testCtx(t), sb.ID()); sandbox.ClassOf(err) != sandbox.NotFound {
		t.Errorf("connect after delete: %v", err)
	}
}

// List removes what an ended sandbox left when it meets it.
func TestListCleansEnded(t *testing.T) {
	p := openProvider(t)
	sb := create(t, p, sandbox.Spec{Labels: map[string]string{"test": "list-cleans"}})
	if err := sb.SetTimeout(testCtx(t), 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(procsIn(sb.ID())) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	infos, err := p.List(testCtx(t), map[string]string{"test": "list-cleans"})
	if err != nil || len(infos) != 0 {
		t.Fatalf("List = %v, %v; want nothing", infos, err)
	}
	assertNoLeftovers(t, sb.ID())
}

// RemoveImage refuses an image that a live sandbox runs on, naming it.
func TestRemoveImageInUse(t *testing.T) {
	p := openProvider(t)
	ref := "test.local/remove-me:1"
	s, err := image.Open(stateDir, image.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Import(testCtx(t), ref, testimage.BusyboxTar(t)); err != nil {
		t.Fatal(err)
	}
	sb := create(t, p, sandbox.Spec{Image: ref})
	err = local.RemoveImage(testCtx(t), options(), ref)
	if sandbox.ClassOf(err) != sandbox.InvalidArgument || !strings.Contains(err.Error(), sb.ID()) {
		t.Fatalf("remove an image in use: %v, want InvalidArgument naming %s", err, sb.ID())
	}
	if err := p.Delete(testCtx(t), sb.ID()); err != nil {
		t.Fatal(err)
	}
	if err := local.RemoveImage(testCtx(t), options(), ref); err != nil {
		t.Fatalf("remove an unused image: %v", err)
	}
	if _, err := s.Resolve(testCtx(t), ref); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("resolve after remove: %v", err)
	}
}

// The sandbox's own envd endpoint (what `berth serve` proxies to) answers
// envd calls with the token it hands out.
func TestEnvdEndpoint(t *testing.T) {
	p := openProvider(t)
	sb := create(t, p, sandbox.Spec{})
	ep, err := sb.EnvdEndpoint(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	c, err := envd.NewClient(ep.BaseURL, &http.Client{Transport: ep.Transport}, envd.WithAccessToken(ep.AccessToken))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out bytes.Buffer
	proc, err := c.Exec(testCtx(t), driver.Command{Args: []string{"echo", "through envd"}, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := proc.Wait(testCtx(t)); err != nil || code != 0 || out.String() != "through envd\n" {
		t.Errorf("exec through the endpoint: %d %v %q", code, err, out.String())
	}
}

// assertLimits checks sandbox id's cgroup files: memoryMB, the default
// pids limit and half a CPU, whichever of the v1 and v2 files exist (at
// least three of them).
func assertLimits(t *testing.T, id string, memoryMB int) {
	t.Helper()
	want := map[string]string{
		"memory.limit_in_bytes": strconv.Itoa(memoryMB << 20), "memory.max": strconv.Itoa(memoryMB << 20),
		"pids.max": strconv.Itoa(local.DefaultPids), "cpu.cfs_quota_us": "50000", "cpu.max": "50000 100000",
	}
	seen := 0
	for _, dir := range cgroupDirs(id) {
		for file, w := range want {
			b, err := os.ReadFile(filepath.Join(dir, file))
			if err != nil {
				continue
			}
			seen++
			if got := strings.TrimSpace(string(b)); got != w {
				t.Errorf("%s/%s = %q, want %q", dir, file, got, w)
			}
		}
	}
	if seen < 3 {
		t.Errorf("found %d of the memory, pids and cpu limit files in %v", seen, cgroupDirs(id))
	}
}
