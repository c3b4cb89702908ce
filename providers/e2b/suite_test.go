package e2b_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/berth-sh/berth/builtin"
	"github.com/berth-sh/berth/internal/testing/testbin"
	"github.com/berth-sh/berth/providers/e2b"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/sandboxtest"
)

// TestMain checks for leaked goroutines (the local provider's reaper, a
// process-wide loop started once by container.SetSubreaper, is meant to
// live as long as the process) and removes the berth binary the local
// tests built.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/berth-sh/berth/internal/reap.Loop"),
		goleak.Cleanup(func(code int) { testbin.Cleanup(); os.Exit(code) }))
}

// openDriver opens the driver on f's control plane and its multiplexing
// data plane; mod may change the options. It is closed when the test ends.
func openDriver(t *testing.T, f *fakeE2B, mod func(*e2b.Options)) *e2b.Provider {
	t.Helper()
	opts := e2b.Options{APIKey: registry.Secret(f.key), APIURL: f.api.URL, SandboxURL: f.data.URL}
	if mod != nil {
		mod(&opts)
	}
	d, err := e2b.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func openProvider(t *testing.T, f *fakeE2B, mod func(*e2b.Options)) *sandbox.Provider {
	t.Helper()
	return sandbox.NewProvider("e2b", openDriver(t, f, mod))
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestSuite runs the conformance suite against the fake E2B server.
func TestSuite(t *testing.T) {
	f := newFake(t, fakeOptions{})
	sandboxtest.Run(t, sandboxtest.Harness{
		Open: func(t *testing.T) *sandbox.Provider { return openProvider(t, f, nil) },
		Spec: func() sandbox.Spec { return sandbox.Spec{Image: "base", TTL: 10 * time.Minute} },
	})
	if left := f.live(); len(left) != 0 {
		t.Errorf("sandboxes left after the suite: %v", left)
	}
}

// The registry's e2b entry, by its alias, opens this driver on the
// addresses of the worker's environment.
func TestRegistryOpensDriver(t *testing.T) {
	f := newFake(t, fakeOptions{})
	var logs bytes.Buffer
	env := registry.MapEnviron(map[string]string{
		"E2B_API_KEY": f.key, "E2B_API_URL": f.api.URL, "E2B_SANDBOX_URL": f.data.URL,
	}, t.TempDir())
	ctx := testCtx(t)
	p, err := builtin.Registry().Open(ctx, "agentenv", env, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sb, err := p.Create(ctx, sandbox.Spec{Image: "base"})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	res, err := sb.Run(ctx, sandbox.Command{Args: []string{"echo", "through the registry"}})
	if err != nil || string(res.Stdout) != "through the registry\n" {
		t.Fatalf("run: %q, %v", res.Stdout, err)
	}
	if err := sb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if f.has(sb.ID()) {
		t.Error("the sandbox is still on the server after Delete")
	}
	if bytes.Contains(logs.Bytes(), []byte(f.key)) {
		t.Errorf("the key is in the logs: %s", logs.String())
	}
}
