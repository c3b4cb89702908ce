package local_test

import (
	"archive/tar"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/berth-sh/berth/internal/testing/testimage"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
	"github.com/berth-sh/berth/sandbox/sandboxtest"
)

// openPooled opens a driver with a pool; the test's end closes it, which
// must remove the pool's ready sandboxes.
func openPooled(t testing.TB, pool local.Pool) *local.Provider {
	t.Helper()
	needRoot(t)
	o := options()
	o.Pool = pool
	p, err := local.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return p
}

// warm creates and deletes a sandbox of spec, so that the pool keeps its
// network filled, and returns the ready sandboxes' IDs once the pool is full.
func warm(t testing.TB, p *local.Provider, spec sandbox.Spec) []string {
	t.Helper()
	ctx := testCtx(t)
	sp := sandbox.NewProvider("local", p)
	sb, err := sp.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	sb.Close()
	ids, err := local.PoolReady(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// A ready sandbox is no sandbox until taken: not listed, not connectable,
// not deletable by ID. Taken, it has the Spec as a fresh one would: env
// over the image's, a working directory made for it, the user, labels,
// limits in its cgroups (memory enforced), and it is reachable from
// another provider value.
func TestPoolHandsOutSpec(t *testing.T) {
	p := openPooled(t, local.Pool{Size: 1})
	ready := warm(t, p, sandbox.Spec{Image: local.DefaultImage})
	if len(ready) != 1 {
		t.Fatalf("ready = %v, want one", ready)
	}
	id := ready[0]
	ctx := testCtx(t)
	infos, err := p.List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		if in.ID == id {
			t.Errorf("List shows the ready sandbox %s", id)
		}
	}
	if _, err := p.Connect(ctx, id); errdefs.ClassOf(err) != errdefs.NotFound {
		t.Errorf("Connect to a ready sandbox: %v, want NotFound", err)
	}
	if err := p.Delete(ctx, id); errdefs.ClassOf(err) != errdefs.NotFound {
		t.Errorf("Delete of a ready sandbox: %v, want NotFound", err)
	}

	sp := sandbox.NewProvider("local", p)
	sb := create(t, sp, sandbox.Spec{
		Env:       map[string]string{"GREETING": "hi", "PATH": "/bin:/usr/bin"},
		WorkDir:   "/work/dir",
		User:      "nobody",
		Labels:    map[string]string{"pool-test": t.Name()},
		Resources: sandbox.Resources{CPUs: 0.5, MemoryMB: 64},
	})
	if sb.ID() != id {
		t.Fatalf("created %s, want the ready %s: the test proves nothing", sb.ID(), id)
	}
	if got := sh(t, sb, `echo "$GREETING $PATH $(pwd) $(id -u):$(id -g) $(hostname)"`); got != "hi /bin:/usr/bin /work/dir 65534:65534 "+id {
		t.Errorf("env, cwd, user and hostname = %q", got)
	}
	res, err := sb.Run(ctx, sandbox.Command{Args: []string{"id", "-u"}, User: "root"})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "0" {
		t.Errorf("command as root: %q %v", res.Stdout, err)
	}
	assertLimits(t, id, 64)
	// The limit set after start holds: a hog is killed at it.
	res, err = sb.Run(ctx, sandbox.Command{Args: []string{"sh", "-c", "head -c 512m /dev/zero | tail -n 1 >/dev/null"}})
	if err != nil || res.ExitCode != 137 {
		t.Errorf("memory hog: exit %d, %v; want 137", res.ExitCode, err)
	}
	infos, err = p.List(ctx, map[string]string{"pool-test": t.Name()})
	if err != nil || len(infos) != 1 || infos[0].ID != id {
		t.Errorf("List by label = %v, %v; want %s", infos, err, id)
	}
	other, err := newDriver(t).Connect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	proc, err := other.Exec(ctx, sandbox.Command{Args: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := proc.Wait(ctx); err != nil || code != 0 {
		t.Errorf("exec through another provider value: %d, %v", code, err)
	}
}

// A pooled sandbox ends at its TTL like any other.
func TestPoolTTL(t *testing.T) {
	p := openPooled(t, local.Pool{Size: 1})
	ready := warm(t, p, sandbox.Spec{Image: local.DefaultImage})
	const ttl = 1500 * time.Millisecond
	sb := create(t, sandbox.NewProvider("local", p), sandbox.Spec{TTL: ttl})
	created := time.Now()
	if sb.ID() != ready[0] {
		t.Fatalf("created %s, want the ready %s", sb.ID(), ready[0])
	}
	for len(procsIn(sb.ID())) > 0 {
		if time.Since(created) > ttl+10*time.Second {
			t.Fatalf("sandbox %s still runs long after its TTL", sb.ID())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if time.Since(created) < ttl-500*time.Millisecond {
		t.Fatalf("sandbox ended after %v, before its TTL", time.Since(created))
	}
	if _, err := p.Connect(testCtx(t), sb.ID()); errdefs.ClassOf(err) != errdefs.NotFound {
		t.Errorf("Connect after the TTL: %v, want NotFound", err)
	}
}

// Close removes the ready sandboxes entirely and is idempotent; Create
// still works after it, without a pool.
func TestPoolClose(t *testing.T) {
	needRoot(t)
	o := options()
	o.Pool = local.Pool{Size: 2}
	p, err := local.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ready := warm(t, p, sandbox.Spec{Image: local.DefaultImage})
	if len(ready) != 2 {
		t.Fatalf("ready = %v, want two", ready)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for _, id := range ready {
		assertNoLeftovers(t, id)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	sb := create(t, sandbox.NewProvider("local", p), sandbox.Spec{})
	if slices.Contains(ready, sb.ID()) {
		t.Errorf("Create after Close handed out a removed sandbox")
	}
	sh(t, sb, "true")
}

// Ready sandboxes have no image: one started ahead of a Create of the
// default image is handed to a Create of another image, whose root,
// environment and files it then has, and nothing of the pool's blank root.
// No Create, no ready sandbox.
func TestPoolAnyImage(t *testing.T) {
	p := openPooled(t, local.Pool{Size: 1})
	ctx := testCtx(t)
	time.Sleep(200 * time.Millisecond) // time enough to start one (~40 ms)
	if ids, err := local.PoolReady(ctx, p); err != nil || len(ids) != 0 {
		t.Fatalf("ready before any Create: %v %v", ids, err)
	}
	ready := warm(t, p, sandbox.Spec{Image: local.DefaultImage})
	if len(ready) != 1 {
		t.Fatalf("ready = %v, want one", ready)
	}
	ref := importBare(t)
	sb := create(t, sandbox.NewProvider("local", p), sandbox.Spec{Image: ref, Env: map[string]string{"X": "y"}})
	if sb.ID() != ready[0] {
		t.Fatalf("created %s, want the ready %s: the test proves nothing", sb.ID(), ready[0])
	}
	got := sh(t, sb, `ls /lib 2>&1; echo "$X"; ls -a / | tr '\n' ' '; cat /etc/hostname`)
	want := "ls: /lib: No such file or directory\ny\n. .. .berth bin dev etc home proc root sys tmp usr var " + ready[0]
	if got != want {
		t.Errorf("the sandbox from the pool is not the bare image's:\n%q\nwant\n%q", got, want)
	}
}

// Each network mode has its own ready sandboxes: a public one has slirp's
// interface, one with none only loopback.
func TestPoolPerNetwork(t *testing.T) {
	if _, err := exec.LookPath("slirp4netns"); err != nil {
		t.Skip("needs slirp4netns: apt-get install slirp4netns")
	}
	p := openPooled(t, local.Pool{Size: 1})
	none := warm(t, p, sandbox.Spec{Image: local.DefaultImage})
	public := sandbox.Spec{Image: local.DefaultImage, Network: sandbox.Network{Mode: sandbox.NetworkPublic}}
	both := warm(t, p, public)
	if len(both) != 2 || !slices.Contains(both, none[0]) {
		t.Fatalf("ready = %v after a public create, want %s and a public one", both, none[0])
	}
	sp := sandbox.NewProvider("local", p)
	pub := create(t, sp, public)
	loop := create(t, sp, sandbox.Spec{})
	if !slices.Contains(both, pub.ID()) || loop.ID() != none[0] {
		t.Fatalf("created %s and %s, want the ready %v", pub.ID(), loop.ID(), both)
	}
	if got := sh(t, pub, "ls /sys/class/net | tr '\n' ' '"); got != "lo tap0" {
		t.Errorf("public sandbox interfaces: %q", got)
	}
	if got := sh(t, loop, "ls /sys/class/net | tr '\n' ' '"); got != "lo" {
		t.Errorf("network none sandbox interfaces: %q", got)
	}
}

// Bad pool options are refused by New.
func TestPoolRefusals(t *testing.T) {
	needRoot(t)
	for _, pool := range []local.Pool{{Size: -1}, {Size: 65}} {
		o := options()
		o.Pool = pool
		if _, err := local.New(o); errdefs.ClassOf(err) != errdefs.InvalidArgument {
			t.Errorf("New with %+v: %v, want InvalidArgument", pool, err)
		}
	}
}

// The conformance suite passes on pooled sandboxes. Every case shares one
// pooled provider value (closing it would empty the pool), and at least
// some cases must have run on a pooled sandbox.
func TestPoolSuite(t *testing.T) {
	p := openPooled(t, local.Pool{Size: 4})
	spec := func() sandbox.Spec { return sandbox.Spec{Image: local.DefaultImage, TTL: 10 * time.Minute} }
	warm(t, p, spec())
	t.Run("suite", func(t *testing.T) {
		sandboxtest.Run(t, sandboxtest.Harness{
			Open:        func(t *testing.T) *sandbox.Provider { return sandbox.NewProvider("local", keepOpen{p}) },
			Spec:        spec,
			ExpiryGrace: 3 * time.Second,
		})
	})
	if n := local.PoolHanded(p); n < 4 {
		t.Errorf("%d cases ran on pooled sandboxes, want at least the 4 ready at the start", n)
	} else {
		t.Logf("%d cases ran on pooled sandboxes", n)
	}
}

// keepOpen shares one driver among the suite's provider values.
type keepOpen struct{ *local.Provider }

func (keepOpen) Close() error { return nil }

var _ driver.Provider = keepOpen{}

// poolHelperEnv makes helperMain open a pool, print its ready sandboxes'
// IDs and wait to be killed; with crashHelperEnv too, it first creates a
// sandbox of helperTTL and prints its ID before theirs.
const poolHelperEnv = "BERTH_LOCAL_TEST_POOL_HELPER"

func poolHelperMain() int {
	o := helperOptions()
	o.Pool = local.Pool{Size: 2}
	d, err := local.New(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	p := sandbox.NewProvider("local", d)
	var ids []string
	spec := sandbox.Spec{Image: local.DefaultImage}
	crash := os.Getenv(crashHelperEnv) != ""
	if crash {
		// With a disk: its mount and the ready ones' are left too.
		spec.Resources.StorageMB = attackDiskMB
	}
	sb, err := p.Create(ctx, spec) // the pool fills from the first ask
	if err == nil {
		err = sb.Delete(ctx)
	}
	if err == nil && crash {
		// The TTL's sandbox last, so that its TTL starts as the test
		// reads the IDs.
		if _, err = local.PoolReady(ctx, d); err == nil {
			spec.TTL = helperTTL
			sb, err = p.Create(ctx, spec)
		}
		if err == nil {
			ids = append(ids, sb.ID())
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ready, err := local.PoolReady(ctx, d)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(strings.Join(append(ids, ready...), " "))
	select {} // until SIGKILL
}

// A pool outlives nothing: its owner is SIGKILLed, its ready sandboxes'
// agents read EOF on their config pipe and exit, and Reap removes what is
// left, as for a creator killed mid-create.
func TestPoolOwnerKilled(t *testing.T) {
	p := newDriver(t)
	cmd, ids := startHelper(t, 2, poolHelperEnv+"=1")
	for _, id := range ids {
		if len(procsIn(id)) == 0 {
			t.Errorf("ready sandbox %s has no processes before its owner dies", id)
		}
	}
	if reaped, err := p.Reap(testCtx(t)); err != nil || slices.ContainsFunc(reaped, func(id string) bool { return slices.Contains(ids, id) }) {
		t.Errorf("Reap took a live pool's sandboxes: %v, %v", reaped, err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for _, id := range ids {
		for len(procsIn(id)) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("ready sandbox %s still runs after its owner died", id)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	reaped, err := p.Reap(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if !slices.Contains(reaped, id) {
			t.Errorf("Reap = %v, want %s among them", reaped, id)
		}
		assertNoLeftovers(t, id)
	}
}

// A ready sandbox that cannot take its Spec (an image whose /etc is a
// symlink loop, so no mount point can be made in it) is removed, leaving
// nothing, and Create goes the cold way, which reports the image's fault.
// The pool refills.
func TestPoolClaimFails(t *testing.T) {
	p := openPooled(t, local.Pool{Size: 1})
	ready := warm(t, p, sandbox.Spec{Image: local.DefaultImage})
	host := testimage.Serve(t, map[string]v1.Image{
		"loop/etc:1": testimage.Image(t, v1.Config{Cmd: []string{"sh"}},
			testimage.Layer(t, testimage.Entry{Name: "etc", Type: tar.TypeSymlink, Link: "etc"})),
	})
	sp := sandbox.NewProvider("local", p)
	ctx := testCtx(t)
	sb, err := sp.Create(ctx, sandbox.Spec{Image: host + "/loop/etc:1"})
	if err == nil {
		sb.Delete(ctx)
		sb.Close()
		t.Fatal("a sandbox whose /etc loops was created")
	}
	t.Logf("%v", err)
	if local.PoolHanded(p) != 0 {
		t.Errorf("Create counts a ready sandbox as handed out")
	}
	assertNoLeftovers(t, ready[0])
	now, err := local.PoolReady(ctx, p)
	if err != nil || len(now) != 1 || now[0] == ready[0] {
		t.Fatalf("pool after the failure: %v %v, want one new ready sandbox", now, err)
	}
	if sh(t, create(t, sp, sandbox.Spec{}), "echo ok") != "ok" {
		t.Error("the refilled pool's sandbox does not work")
	}
}
