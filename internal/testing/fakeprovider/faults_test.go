package fakeprovider_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/testing/fakeprovider"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// bound is how long a test waits for something that should happen at once;
// it keeps a broken fake from hanging the run, it measures nothing.
const bound = 15 * time.Second

func newProvider(t *testing.T, opts fakeprovider.Options) *sandbox.Provider {
	t.Helper()
	if opts.StateDir == "" {
		opts.StateDir = t.TempDir()
	}
	d, err := fakeprovider.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	p := sandbox.NewProvider("fake", d)
	t.Cleanup(func() { p.Close() })
	return p
}

func newSandbox(t *testing.T, p *sandbox.Provider, spec sandbox.Spec) *sandbox.Sandbox {
	t.Helper()
	if spec.Image == "" {
		spec.Image = "host"
	}
	sb, err := p.Create(t.Context(), spec)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() {
		_ = p.Delete(context.Background(), sb.ID())
		sb.Close()
	})
	return sb
}

func boundCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), bound)
	t.Cleanup(cancel)
	return ctx
}

func TestNewNeedsStateDir(t *testing.T) {
	_, err := fakeprovider.New(fakeprovider.Options{})
	if !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Fatalf("New without a state dir: %v, want InvalidArgument", err)
	}
}

func TestFailCreate(t *testing.T) {
	inj := fakeprovider.NewInjector(fakeprovider.Faults{
		FailCreate: errdefs.Errorf(errdefs.ResourceExhausted, "injected quota"),
	})
	p := newProvider(t, fakeprovider.Options{Faults: inj})
	_, err := p.Create(t.Context(), sandbox.Spec{Image: "host"})
	if !errors.Is(err, sandbox.ErrResourceExhausted) || !sandbox.ClassOf(err).Retryable() {
		t.Fatalf("create with FailCreate: %v, want the injected ResourceExhausted", err)
	}
	if infos, _ := p.List(t.Context(), nil); len(infos) != 0 {
		t.Errorf("a failed create left %d sandboxes", len(infos))
	}
	// Faults change at run time: clearing it lets the next create through.
	inj.Set(fakeprovider.Faults{})
	newSandbox(t, p, sandbox.Spec{})
}

func TestFailDelete(t *testing.T) {
	inj := fakeprovider.NewInjector(fakeprovider.Faults{})
	p := newProvider(t, fakeprovider.Options{Faults: inj})
	sb := newSandbox(t, p, sandbox.Spec{})
	inj.Update(func(f *fakeprovider.Faults) { f.FailDelete = errdefs.Errorf(errdefs.Unavailable, "injected outage") })
	if err := sb.Delete(t.Context()); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("delete with FailDelete: %v, want Unavailable", err)
	}
	if _, err := p.Connect(t.Context(), sb.ID()); err != nil {
		t.Fatalf("the sandbox should survive a failed delete: %v", err)
	}
	inj.Update(func(f *fakeprovider.Faults) { f.FailDelete = nil })
	if err := sb.Delete(t.Context()); err != nil {
		t.Fatalf("delete after clearing the fault: %v", err)
	}
}

func TestHangExec(t *testing.T) {
	inj := fakeprovider.NewInjector(fakeprovider.Faults{HangExec: true})
	p := newProvider(t, fakeprovider.Options{Faults: inj})
	sb := newSandbox(t, p, sandbox.Spec{})

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}})
	if !errors.Is(err, context.DeadlineExceeded) || sandbox.ClassOf(err) != sandbox.DeadlineExceeded {
		t.Fatalf("hung exec: %v, want the context's deadline", err)
	}

	// A process started before the fault: Wait hangs although it has ended.
	inj.Set(fakeprovider.Faults{})
	proc, err := sb.Exec(t.Context(), sandbox.Command{Args: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	inj.Set(fakeprovider.Faults{HangExec: true})
	ctx2, cancel2 := context.WithCancel(t.Context())
	cancel2()
	if _, err := proc.Wait(ctx2); !errors.Is(err, context.Canceled) {
		t.Fatalf("hung wait: %v, want context.Canceled", err)
	}
	inj.Set(fakeprovider.Faults{})
	if code, err := proc.Wait(boundCtx(t)); code != 0 || err != nil {
		t.Fatalf("wait after clearing the fault = %d, %v", code, err)
	}
}

func TestDropStream(t *testing.T) {
	inj := fakeprovider.NewInjector(fakeprovider.Faults{DropStream: true})
	p := newProvider(t, fakeprovider.Options{Faults: inj})
	sb := newSandbox(t, p, sandbox.Spec{})
	var out bytes.Buffer
	// The process would run for 30s: Wait returning at once proves the drop
	// does not wait for it.
	proc, err := sb.Exec(t.Context(), sandbox.Command{
		Args:   []string{"sh", "-c", "echo first; sleep 30; echo never"},
		Stdout: &out,
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = proc.Wait(boundCtx(t))
	if !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("wait on a dropped stream: %v, want Unavailable", err)
	}
	if out.String() != "first\n" {
		t.Errorf("output before the drop = %q, want %q", out.String(), "first\n")
	}
	// The process lives on in the sandbox until the sandbox goes.
	if err := proc.Signal(t.Context(), sandbox.SIGTERM); err != nil {
		t.Errorf("signal after the drop: %v (the process should still run)", err)
	}
}

func TestCreateDelayIgnoresCancel(t *testing.T) {
	inj := fakeprovider.NewInjector(fakeprovider.Faults{CreateDelay: 20 * time.Millisecond})
	state := t.TempDir()
	d, err := fakeprovider.New(fakeprovider.Options{StateDir: state, Faults: inj})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	// The driver, like a remote call already sent, creates anyway: that is
	// what the sandbox wrapper's cleanup is tested against.
	sb, err := d.Create(ctx, sandbox.Spec{Image: "host", TTL: time.Minute, Network: sandbox.Network{Mode: sandbox.NetworkNone}})
	if err != nil {
		t.Fatalf("driver create with a cancelled ctx: %v", err)
	}
	if err := d.Delete(context.Background(), sb.ID()); err != nil {
		t.Fatal(err)
	}
}

func TestTTLKillsAndHides(t *testing.T) {
	p := newProvider(t, fakeprovider.Options{})
	sb := newSandbox(t, p, sandbox.Spec{Labels: map[string]string{"ttl": "short"}})
	proc, err := sb.Exec(t.Context(), sandbox.Command{Args: []string{"sleep", "30"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.SetTimeout(t.Context(), 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	code, err := proc.Wait(boundCtx(t))
	if err != nil || code != 137 {
		t.Fatalf("process at expiry: %d, %v; want killed (137)", code, err)
	}
	if infos, err := p.List(t.Context(), map[string]string{"ttl": "short"}); err != nil || len(infos) != 0 {
		t.Errorf("list after expiry = %v, %v; want none", infos, err)
	}
	if _, err := p.Connect(t.Context(), sb.ID()); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("connect after expiry: %v, want NotFound", err)
	}
}

func TestSetTimeoutExtends(t *testing.T) {
	p := newProvider(t, fakeprovider.Options{})
	sb := newSandbox(t, p, sandbox.Spec{TTL: 100 * time.Millisecond})
	if err := sb.SetTimeout(t.Context(), time.Hour); err != nil {
		t.Fatal(err)
	}
	infos, err := p.List(t.Context(), nil)
	if err != nil || len(infos) != 1 {
		t.Fatalf("list = %v, %v", infos, err)
	}
	if left := time.Until(infos[0].ExpiresAt); left < 59*time.Minute {
		t.Errorf("expiry %v away after SetTimeout(1h)", left)
	}
}

func TestDeleteKillsProcesses(t *testing.T) {
	p := newProvider(t, fakeprovider.Options{})
	sb := newSandbox(t, p, sandbox.Spec{})
	// A background child in the same command must die too.
	proc, err := sb.Exec(t.Context(), sandbox.Command{Args: []string{"sh", "-c", "sleep 30 & sleep 30; wait"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Delete(t.Context()); err != nil {
		t.Fatal(err)
	}
	if code, err := proc.Wait(boundCtx(t)); err != nil || code != 137 {
		t.Fatalf("process of a deleted sandbox: %d, %v; want 137", code, err)
	}
	_, err = sb.Exec(t.Context(), sandbox.Command{Args: []string{"true"}})
	if !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("exec in a deleted sandbox: %v, want NotFound", err)
	}
}

func TestConcurrentDeletesOneWins(t *testing.T) {
	p := newProvider(t, fakeprovider.Options{})
	sb := newSandbox(t, p, sandbox.Spec{})
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = p.Delete(t.Context(), sb.ID()) })
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, sandbox.ErrNotFound):
			t.Errorf("concurrent delete: %v", err)
		}
	}
	if ok != 1 {
		t.Errorf("%d deletes succeeded, want exactly 1", ok)
	}
}

func TestEnvIsNotInherited(t *testing.T) {
	t.Setenv("BERTH_FAKE_HOST_SECRET", "hunter2")
	p := newProvider(t, fakeprovider.Options{})
	sb := newSandbox(t, p, sandbox.Spec{})
	res, err := sb.Run(t.Context(), sandbox.Command{Args: []string{"env"}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(res.Stdout), "hunter2") {
		t.Error("the host's environment leaked into the sandbox")
	}
	if !strings.Contains(string(res.Stdout), "PATH=/usr/local/sbin:") {
		t.Errorf("no default PATH in %q", res.Stdout)
	}
}

func TestMalformedIDs(t *testing.T) {
	p := newProvider(t, fakeprovider.Options{})
	for _, id := range []string{"../x", "a/b", ".", "..", ".trash-x", strings.Repeat("a", 100)} {
		if _, err := p.Connect(t.Context(), id); !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("connect %q: %v, want InvalidArgument", id, err)
		}
		if err := p.Delete(t.Context(), id); !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("delete %q: %v, want InvalidArgument", id, err)
		}
	}
}

// TestSymlinkEscapes: a link planted inside a sandbox does not carry file
// calls or a working directory onto the rest of the host: it resolves
// inside the tree, as it would inside a sandbox, where its target is
// missing (fakeengine's TestSymlinksResolveInside).
func TestSymlinkEscapes(t *testing.T) {
	p := newProvider(t, fakeprovider.Options{})
	sb := newSandbox(t, p, sandbox.Spec{})
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := sb.Run(t.Context(), sandbox.Command{Args: []string{"sh", "-c",
		"ln -s " + outside + " abs && ln -s ../../../../../../../../.." + outside + " rel"}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("planting links: %v %q", err, res.Stderr)
	}
	for _, link := range []string{"/abs", "/rel"} {
		if _, err := sb.ReadFile(t.Context(), link+"/secret"); err == nil {
			t.Errorf("read %s/secret reached the host file", link)
		}
		if err := sb.WriteFile(t.Context(), link+"/planted", []byte("x"), 0o644); err == nil {
			t.Errorf("write %s/planted succeeded", link)
		}
		if _, err := sb.ListDir(t.Context(), link); err == nil {
			t.Errorf("list %s listed a host directory", link)
		}
		_, err := sb.Exec(t.Context(), sandbox.Command{Args: []string{"true"}, Dir: link})
		if !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("exec in %s: %v, want NotFound", link, err)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "planted")); err == nil {
		t.Error("a file was written outside the sandbox")
	}
	// The links themselves are visible for what they are.
	fi, err := sb.Stat(t.Context(), "/abs")
	if err != nil || fi.Type != sandbox.FileSymlink || fi.Target != outside {
		t.Errorf("stat /abs = %+v, %v", fi, err)
	}
}

func TestExecWorkDirMissing(t *testing.T) {
	p := newProvider(t, fakeprovider.Options{})
	sb := newSandbox(t, p, sandbox.Spec{})
	_, err := sb.Exec(t.Context(), sandbox.Command{Args: []string{"true"}, Dir: "/no/such/dir"})
	if !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("exec in a missing dir: %v, want NotFound", err)
	}
}

func TestCapabilities(t *testing.T) {
	p := newProvider(t, fakeprovider.Options{MaxTTL: time.Hour})
	c := p.Capabilities()
	if c.ResourceMode != sandbox.ResourcesLimits || !c.Supports(sandbox.NetworkNone) || c.Supports(sandbox.NetworkPublic) || c.MaxTTL != time.Hour {
		t.Errorf("capabilities = %+v", c)
	}
}
