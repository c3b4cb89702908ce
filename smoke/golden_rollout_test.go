package smoke_test

import (
	"flag"
	"testing"

	"github.com/berth-sh/berth/builtin"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/rollout/rollouttest"
)

var rolloutBackend = flag.String("backend", "", "TestGoldenRollout on this registry entry only (default $BERTH_BACKEND, $HARBOR_ENV_TYPE, else every entry)")

// TestGoldenRollout is the golden test's rollout case on every registry
// entry (rollouttest.RunGolden): `berth rollout` of the smoke task and two
// TB2-style tasks, 2 samples each, with the test engine scripted as the
// golden policy and the TITO strict gate on. local runs for real; e2b runs
// through an in-process berth serve over local; daytona and modal run
// against their in-process servers; an entry added later runs where its
// credential is available. -backend NAME (or $BERTH_BACKEND,
// $HARBOR_ENV_TYPE) runs one entry, as a launcher picks the provider.
func TestGoldenRollout(t *testing.T) {
	reg := builtin.Registry()
	osEnv := registry.OSEnviron()
	only := ""
	if *rolloutBackend != "" || osEnv.Get("BERTH_BACKEND") != "" || osEnv.Get("HARBOR_ENV_TYPE") != "" {
		e, err := reg.Lookup(registry.Backend(*rolloutBackend, osEnv))
		if err != nil {
			t.Fatal(err)
		}
		only = e.Name
	}
	for _, e := range reg.Entries() {
		t.Run(e.Name, func(t *testing.T) {
			if only != "" && e.Name != only {
				t.Skipf("the rollout runs on %s only (-backend, $BERTH_BACKEND or $HARBOR_ENV_TYPE)", only)
			}
			rollouttest.Qwen3(t) // skips, with the install command, without the tokenizer
			env := offlineEnv(t, e, osEnv)
			rollouttest.RunGolden(t, reg, env, e.Name, e.DefaultImage, "builtin-task")
		})
	}
}
