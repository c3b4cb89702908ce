package smoke_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/builtin"
	"github.com/berth-sh/berth/internal/testbin"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/smoke"
)

// TestGolden is the golden test: the golden episode on every registry
// entry. A provider whose credential is not available here is skipped with
// the command that provisions it; local needs no credential and always
// runs where berth can run it (root, runc).
func TestGolden(t *testing.T) {
	reg := builtin.Registry()
	osEnv := registry.OSEnviron()
	for _, e := range reg.Entries() {
		t.Run(e.Name, func(t *testing.T) {
			env := osEnv
			if ok, _ := e.Available(osEnv); !ok {
				t.Skipf("no %s credential here; provision it with: %s", e.Name, e.Credential.ProvisionHint)
			}
			if e.Name == "local" {
				env = localEnv(t, osEnv)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			rep, err := smoke.Run(ctx, smoke.Options{Connector: "harbor", Backend: e.Name, Registry: reg, Env: env}, nil)
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			rep.Print(&out)
			if !rep.Pass {
				t.Fatalf("golden episode on %s failed:\n%s", e.Name, out.String())
			}
			t.Logf("\n%s", out.String())
		})
	}
}

// localEnv points the local entry at a state dir and a static agent of the
// test's own, on top of the process environment.
func localEnv(t testing.TB, base registry.Environ) registry.Environ {
	t.Helper()
	testbin.NeedLocal(t)
	bin, err := testbin.Berth()
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	t.Cleanup(func() {
		// Nothing may outlive the test: reap what the episode left.
		p, err := local.New(local.Options{StateDir: state, AgentBinary: bin})
		if err == nil {
			ids, _ := p.Reap(context.Background())
			if len(ids) > 0 {
				t.Errorf("sandboxes left after the golden episode: %v", ids)
			}
			p.Close()
		}
	})
	over := map[string]string{local.EnvStateDir: state, local.EnvAgentBinary: bin}
	return registry.Environ{Home: base.Home, Lookup: func(k string) (string, bool) {
		if v, ok := over[k]; ok {
			return v, true
		}
		return base.Lookup(k)
	}}
}
