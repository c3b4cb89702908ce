package smoke_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth/internal/testing/harbortest"
	"github.com/berth-sh/berth/smoke"
)

func TestGoldenEpisodeOnFake(t *testing.T) {
	reg := harbortest.Registry(t, nil)
	rep, err := smoke.Run(context.Background(), smoke.Options{Backend: "fake", Registry: reg, Env: harbortest.Env(t)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Pass || rep.Reward != 1 || rep.ExitStatus != smoke.Submitted {
		t.Fatalf("golden episode: %+v", rep)
	}
	if len(rep.Phases) != 5 {
		t.Fatalf("phases = %+v", rep.Phases)
	}
	for _, p := range rep.Phases {
		if !p.Ran {
			t.Errorf("phase %s did not run", p.Name)
		}
	}
	var out strings.Builder
	rep.Print(&out)
	for _, want := range []string{"backend fake", "image resolution", "sandbox create", "exec", "verifier", "teardown", "PASS reward=1 exit_status=Submitted"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestNopFails(t *testing.T) {
	reg := harbortest.Registry(t, nil)
	rep, err := smoke.Run(context.Background(), smoke.Options{Backend: "fake", Agent: "nop", Registry: reg, Env: harbortest.Env(t)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.ResultsDir != "" { // a FAIL keeps its trial directory for the user
		defer os.RemoveAll(filepath.Dir(rep.ResultsDir))
	}
	if rep.Pass || rep.Reward != 0 || rep.ExitStatus != smoke.Submitted || rep.ResultsDir == "" {
		t.Fatalf("nop episode: %+v", rep)
	}
}

func TestUsageErrors(t *testing.T) {
	reg := harbortest.Registry(t, nil)
	for _, o := range []smoke.Options{
		{Connector: "nemogym", Backend: "fake"},
		{Connector: "harbor", Backend: "nosuch"},
		{Connector: "harbor", Backend: "fake", Agent: "gpt-9"},
		{Connector: "harbor", Backend: "fake", TaskDir: t.TempDir()},
	} {
		o.Registry, o.Env = reg, harbortest.Env(t)
		_, err := smoke.Run(context.Background(), o, nil)
		var ue *smoke.UsageError
		if !errors.As(err, &ue) {
			t.Errorf("%+v: err = %v, want a usage error", o, err)
		}
	}
	_, err := smoke.Run(context.Background(), smoke.Options{Connector: "nemogym", Backend: "fake", Registry: reg}, nil)
	if err == nil || !strings.Contains(err.Error(), "nemogym connector is not built yet") {
		t.Errorf("nemogym: %v", err)
	}
}

// The openenv connector's golden episode on the fake provider: the same
// five phases through the protocol; nop fails with reward 0.
func TestOpenEnvConnectorOnFake(t *testing.T) {
	reg := harbortest.Registry(t, nil)
	for _, c := range []struct {
		agent string
		pass  bool
	}{{"golden", true}, {"nop", false}} {
		rep, err := smoke.Run(context.Background(), smoke.Options{Connector: "openenv", Backend: "fake", Agent: c.agent, Registry: reg, Env: harbortest.Env(t)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		rep.Print(&out)
		if rep.Pass != c.pass || rep.ExitStatus != smoke.Submitted || (c.pass && rep.Reward != 1) || (!c.pass && rep.Reward != 0) || rep.SandboxID == "" {
			t.Fatalf("%s:\n%s", c.agent, out.String())
		}
		if len(rep.Phases) != 5 {
			t.Fatalf("phases: %+v", rep.Phases)
		}
		for _, p := range rep.Phases {
			if !p.Ran {
				t.Errorf("%s: phase %s did not run", c.agent, p.Name)
			}
		}
		if !strings.Contains(out.String(), "connector openenv, backend fake") {
			t.Errorf("report:\n%s", out.String())
		}
		t.Logf("\n%s", out.String())
	}
}
