package local_test

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth/builtin"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/smoke"
)

// smokeEnv is the environment `berth smoke` would run in, pointing the
// registry's local entry at the tests' state dir and static agent.
func smokeEnv(t *testing.T) registry.Environ {
	return registry.MapEnviron(map[string]string{
		local.EnvStateDir: stateDir, local.EnvAgentBinary: agentBin,
	}, t.TempDir())
}

// `berth smoke --connector harbor --backend local` passes: the built-in
// task on the default image, through the registry, every phase run, and
// the sandbox gone afterwards.
func TestGoldenEpisode(t *testing.T) {
	needRoot(t)
	var logs bytes.Buffer
	rep, err := smoke.Run(testCtx(t), smoke.Options{
		Connector: "harbor", Backend: "local", Registry: builtin.Registry(), Env: smokeEnv(t),
	}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	rep.Print(&out)
	if !rep.Pass || rep.Reward != 1 || rep.ExitStatus != smoke.Submitted {
		t.Fatalf("golden episode on local:\n%s\nlogs:\n%s", out.String(), logs.String())
	}
	for _, p := range rep.Phases {
		if !p.Ran {
			t.Errorf("phase %s did not run", p.Name)
		}
	}
	if _, err := os.Stat(filepath.Join(stateDir, "sandboxes", rep.SandboxID)); !os.IsNotExist(err) {
		t.Errorf("sandbox %s left after teardown (%v)", rep.SandboxID, err)
	}
	t.Logf("\n%s", out.String())
}

// The nop agent does nothing, so the verifier scores 0 and the smoke FAILs.
func TestNopEpisodeFails(t *testing.T) {
	needRoot(t)
	rep, err := smoke.Run(testCtx(t), smoke.Options{
		Connector: "harbor", Backend: "local", Agent: "nop", Registry: builtin.Registry(), Env: smokeEnv(t),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.ResultsDir != "" {
		defer os.RemoveAll(filepath.Dir(rep.ResultsDir))
	}
	if rep.Pass || rep.Reward != 0 || rep.ExitStatus != smoke.Submitted {
		t.Fatalf("nop episode: %+v", rep)
	}
}
