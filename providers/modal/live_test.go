package modal_test

import (
	"testing"
	"time"

	"github.com/berth-sh/berth/builtin"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/sandboxtest"
	"github.com/berth-sh/berth/smoke"
)

// liveRegistry returns the registry and environment for runs against Modal
// itself, or skips with the entry's provision hint when no credential
// resolves here.
func liveRegistry(t *testing.T) (*registry.Registry, registry.Environ) {
	t.Helper()
	if testing.Short() {
		t.Skip("live Modal runs are skipped in -short mode")
	}
	r := builtin.Registry()
	e, err := r.Lookup("modal")
	if err != nil {
		t.Fatal(err)
	}
	env := registry.OSEnviron()
	if ok, _ := e.Available(env); !ok {
		t.Skipf("no Modal credential (MODAL_TOKEN_ID + MODAL_TOKEN_SECRET, or ~/.modal.toml); provision it with: %s", e.Credential.ProvisionHint)
	}
	return r, env
}

// TestLiveSuite runs the conformance suite on Modal when a credential is
// available.
func TestLiveSuite(t *testing.T) {
	r, env := liveRegistry(t)
	sandboxtest.Run(t, sandboxtest.Harness{
		Open: func(t *testing.T) *sandbox.Provider {
			p, err := r.Open(t.Context(), "modal", env, nil)
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		Spec: func() sandbox.Spec { return sandbox.Spec{Image: testImage, TTL: 15 * time.Minute} },
		// Terminate on Modal settles within seconds.
		ExpiryGrace: 30 * time.Second,
	})
}

// TestLiveGoldenEpisode runs the golden episode on Modal when a credential
// is available.
func TestLiveGoldenEpisode(t *testing.T) {
	r, env := liveRegistry(t)
	rep, err := smoke.Run(t.Context(), smoke.Options{Backend: "modal", TaskDir: writeTask(t, testImage), Registry: r, Env: env}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Pass {
		t.Fatalf("golden episode on Modal: %+v", rep)
	}
}
