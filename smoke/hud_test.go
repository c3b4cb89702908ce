package smoke_test

import (
	"context"
	"strings"
	"testing"

	"github.com/berth-sh/berth/internal/testing/harbortest"
	"github.com/berth-sh/berth/smoke"
)

// The golden episode through HUD's protocol on the fake provider: every
// phase runs and the solution, sent through the MCP tools over a tunnel,
// scores 1; nop scores 0 with exit status Submitted.
func TestHUDEpisodeOnFake(t *testing.T) {
	reg := harbortest.Registry(t, nil)
	for _, c := range []struct {
		agent  string
		reward float64
	}{{"golden", 1}, {"nop", 0}} {
		rep, err := smoke.Run(context.Background(), smoke.Options{Connector: "hud", Backend: "fake", Agent: c.agent, Registry: reg, Env: harbortest.Env(t)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		rep.Print(&out)
		if rep.Pass != (c.reward == 1) || rep.Reward != c.reward || rep.ExitStatus != smoke.Submitted {
			t.Fatalf("%s through hud:\n%s", c.agent, out.String())
		}
		if len(rep.Phases) != 5 || rep.SandboxID == "" {
			t.Fatalf("report:\n%s", out.String())
		}
		for _, p := range rep.Phases {
			if !p.Ran {
				t.Errorf("phase %s did not run", p.Name)
			}
		}
		if !strings.Contains(out.String(), "connector hud") {
			t.Errorf("report:\n%s", out.String())
		}
		t.Logf("\n%s", out.String())
	}
}
