package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/testing/fakeprovider"
	"github.com/berth-sh/berth/sandbox"
)

func wantClass(t *testing.T, what string, err error, c sandbox.Class) {
	t.Helper()
	if !errors.Is(err, c.Sentinel()) {
		t.Errorf("%s: %v, want class %v", what, err, c)
	}
}

func TestClosedProvider(t *testing.T) {
	p, _ := newFake(t, fakeprovider.Options{})
	sb := create(t, p)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	ctx := t.Context()
	_, err := p.Create(ctx, sandbox.Spec{Image: "host"})
	wantClass(t, "create", err, sandbox.InvalidArgument)
	_, err = p.Connect(ctx, sb.ID())
	wantClass(t, "connect", err, sandbox.InvalidArgument)
	_, err = p.List(ctx, nil)
	wantClass(t, "list", err, sandbox.InvalidArgument)
	wantClass(t, "delete", p.Delete(ctx, sb.ID()), sandbox.InvalidArgument)
}

func TestClosedSandbox(t *testing.T) {
	p, _ := newFake(t, fakeprovider.Options{})
	sb := create(t, p)
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	calls := map[string]error{
		"write":         sb.WriteFile(ctx, "/f", nil, 0),
		"make dir":      sb.MakeDir(ctx, "/d"),
		"remove":        sb.Remove(ctx, "/f"),
		"set timeout":   sb.SetTimeout(ctx, time.Minute),
		"delete":        sb.Delete(ctx),
		"upload":        sb.Upload(ctx, "/d", bytes.NewReader(nil)),
		"upload dir":    sb.UploadDir(ctx, t.TempDir(), "/d"),
		"download dir":  sb.DownloadDir(ctx, "/", t.TempDir()),
		"write from":    sb.WriteFrom(ctx, "/f", bytes.NewReader(nil), 0),
		"close (again)": nil,
	}
	_, calls["exec"] = sb.Exec(ctx, sandbox.Command{Args: []string{"true"}})
	_, calls["run"] = sb.Run(ctx, sandbox.Command{Args: []string{"true"}})
	_, calls["read"] = sb.ReadFile(ctx, "/f")
	_, calls["open"] = sb.Open(ctx, "/f")
	_, calls["stat"] = sb.Stat(ctx, "/")
	_, calls["list"] = sb.ListDir(ctx, "/")
	_, calls["download"] = sb.Download(ctx, "/")
	calls["close (again)"] = sb.Close()
	for name, err := range calls {
		if name == "close (again)" {
			if err != nil {
				t.Errorf("second close: %v", err)
			}
			continue
		}
		wantClass(t, name+" after close", err, sandbox.InvalidArgument)
	}
	// The handle was released, not the sandbox.
	if _, err := p.Connect(ctx, sb.ID()); err != nil {
		t.Errorf("connect after close: %v", err)
	}
}

// TestCreateAfterCancelIsDeleted: a Create whose caller gave up while the
// provider was still working leaves nothing behind.
func TestCreateAfterCancelIsDeleted(t *testing.T) {
	inj := fakeprovider.NewInjector(fakeprovider.Faults{CreateDelay: 20 * time.Millisecond})
	state := t.TempDir()
	p, _ := newFake(t, fakeprovider.Options{StateDir: state, Faults: inj})
	ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
	defer cancel()
	sb, err := p.Create(ctx, sandbox.Spec{Image: "host", Labels: map[string]string{"abandoned": "1"}})
	if sb != nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("create past its deadline = %v, %v; want nil and the deadline", sb, err)
	}
	var e *sandbox.Error
	if !errors.As(err, &e) || e.SandboxID == "" {
		t.Fatalf("the error %v does not name the sandbox that was cleaned up", err)
	}
	fresh, _ := newFake(t, fakeprovider.Options{StateDir: state})
	if infos, err := fresh.List(t.Context(), nil); err != nil || len(infos) != 0 {
		t.Errorf("after an abandoned create: list = %v, %v; want none", infos, err)
	}
	_, err = fresh.Connect(t.Context(), e.SandboxID)
	wantClass(t, "connect to the abandoned sandbox", err, sandbox.NotFound)
}

// TestDeleteSurvivesCancel: teardown runs although the caller's context has
// ended. The fake's Delete honours ctx, so only the wrapper makes it pass.
func TestDeleteSurvivesCancel(t *testing.T) {
	p, d := newFake(t, fakeprovider.Options{})
	sb := create(t, p)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := d.Delete(ctx, sb.ID()); !errors.Is(err, context.Canceled) {
		t.Fatalf("the fake driver's delete with a cancelled ctx: %v; the test needs it to refuse", err)
	}
	if err := sb.Delete(ctx); err != nil {
		t.Fatalf("delete with a cancelled ctx: %v", err)
	}
	_, err := p.Connect(t.Context(), sb.ID())
	wantClass(t, "connect after delete", err, sandbox.NotFound)
}

func TestCreateRefusesUnsupported(t *testing.T) {
	p, _ := newFake(t, fakeprovider.Options{MaxTTL: time.Hour})
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		spec sandbox.Spec
		want sandbox.Class
	}{
		{"public network", sandbox.Spec{Image: "x", Network: sandbox.Network{Mode: sandbox.NetworkPublic}}, sandbox.NotSupported},
		{"gpus", sandbox.Spec{Image: "x", Resources: sandbox.Resources{GPUs: 1}}, sandbox.NotSupported},
		{"build", sandbox.Spec{Build: &sandbox.Build{ContextDir: "/ctx"}}, sandbox.NotSupported},
		{"ttl over max", sandbox.Spec{Image: "x", TTL: 2 * time.Hour}, sandbox.InvalidArgument},
		{"invalid spec", sandbox.Spec{}, sandbox.InvalidArgument},
	} {
		_, err := p.Create(ctx, tc.spec)
		wantClass(t, tc.name, err, tc.want)
	}
	if infos, _ := p.List(ctx, nil); len(infos) != 0 {
		t.Errorf("refused creates left %d sandboxes", len(infos))
	}
}

func TestCreateFillsDefaults(t *testing.T) {
	p, _ := newFake(t, fakeprovider.Options{})
	sb := create(t, p)
	infos, err := p.List(t.Context(), nil)
	if err != nil || len(infos) != 1 {
		t.Fatalf("list = %v, %v", infos, err)
	}
	if infos[0].ID != sb.ID() || infos[0].Provider != "fake" {
		t.Errorf("info = %+v, want id %s and provider fake", infos[0], sb.ID())
	}
	if ttl := infos[0].ExpiresAt.Sub(infos[0].CreatedAt); ttl != sandbox.DefaultTTL {
		t.Errorf("a zero TTL reached the provider as %v, want the default %v", ttl, sandbox.DefaultTTL)
	}
}

func TestArgumentChecks(t *testing.T) {
	p, _ := newFake(t, fakeprovider.Options{})
	sb := create(t, p)
	ctx := t.Context()
	_, err := p.Connect(ctx, "")
	wantClass(t, "connect with an empty id", err, sandbox.InvalidArgument)
	wantClass(t, "delete with an empty id", p.Delete(ctx, ""), sandbox.InvalidArgument)
	_, err = p.List(ctx, map[string]string{"bad=key": "v"})
	wantClass(t, "list with a bad label", err, sandbox.InvalidArgument)
	wantClass(t, "set timeout 0", sb.SetTimeout(ctx, 0), sandbox.InvalidArgument)
	wantClass(t, "upload to a relative dir", sb.Upload(ctx, "rel", bytes.NewReader(nil)), sandbox.InvalidArgument)
	_, err = sb.Download(ctx, "rel")
	wantClass(t, "download a relative path", err, sandbox.InvalidArgument)
	_, err = sb.Stat(ctx, "rel")
	wantClass(t, "stat a relative path", err, sandbox.InvalidArgument)
}

func TestWriteFileDefaultMode(t *testing.T) {
	p, _ := newFake(t, fakeprovider.Options{})
	sb := create(t, p)
	if err := sb.WriteFile(t.Context(), "/f", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	fi, err := sb.Stat(t.Context(), "/f")
	if err != nil || fi.Mode != 0o644 {
		t.Errorf("mode 0 wrote %o, %v; want 644", fi.Mode, err)
	}
}

func TestRunNonZeroIsResult(t *testing.T) {
	p, _ := newFake(t, fakeprovider.Options{})
	sb := create(t, p)
	res, err := sb.Run(t.Context(), sandbox.Command{Args: []string{"sh", "-c", "echo o; echo e >&2; exit 3"}})
	if err != nil || res.ExitCode != 3 || string(res.Stdout) != "o\n" || string(res.Stderr) != "e\n" {
		t.Errorf("run = %+v, %v; want exit 3 with output captured and no error", res, err)
	}
}

// TestWaitCtxLeavesProcess: Wait returning on its ctx does not stop the
// process.
func TestWaitCtxLeavesProcess(t *testing.T) {
	p, _ := newFake(t, fakeprovider.Options{})
	sb := create(t, p)
	proc, err := sb.Exec(t.Context(), sandbox.Command{Args: []string{"sleep", "30"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := proc.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait with a cancelled ctx: %v", err)
	}
	if err := proc.Signal(t.Context(), sandbox.SIGKILL); err != nil {
		t.Fatalf("the process should still run after Wait gave up: %v", err)
	}
	wctx, wcancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer wcancel()
	if code, err := proc.Wait(wctx); code != 137 || err != nil {
		t.Errorf("wait after kill = %d, %v", code, err)
	}
}

// TestRunCtxKeepsOutputSoFar: Run given up on its ctx returns what the
// command printed until then, while the command runs on and keeps writing
// (under -race this caught Run reading its buffers as the driver wrote).
func TestRunCtxKeepsOutputSoFar(t *testing.T) {
	p, _ := newFake(t, fakeprovider.Options{})
	sb := create(t, p)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	res, err := sb.Run(ctx, sandbox.Command{Args: []string{"sh", "-c", "echo started; while :; do echo more; sleep 0.01; done"}})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(string(res.Stdout), "started\n") {
		t.Fatalf("run past its ctx = %q, %v; want the output so far and the ctx's error", res.Stdout, err)
	}
	time.Sleep(50 * time.Millisecond) // the command writes on; res must not change
	if !strings.HasPrefix(string(res.Stdout), "started\n") {
		t.Fatalf("the result changed after Run returned: %q", res.Stdout)
	}
}

func TestFaultClassesThroughWrapper(t *testing.T) {
	inj := fakeprovider.NewInjector(fakeprovider.Faults{FailCreate: sandbox.Errorf(sandbox.Unavailable, "injected")})
	p, _ := newFake(t, fakeprovider.Options{Faults: inj})
	_, err := p.Create(t.Context(), sandbox.Spec{Image: "host"})
	var e *sandbox.Error
	if !errors.As(err, &e) || e.Op != "create" || e.Provider != "fake" || !sandbox.ClassOf(err).Retryable() {
		t.Errorf("create with an injected outage: %v, want a retryable create error from fake", err)
	}
}
