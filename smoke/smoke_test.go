package smoke_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth/internal/harbortest"
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
		{Connector: "openenv", Backend: "fake"},
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
	_, err := smoke.Run(context.Background(), smoke.Options{Connector: "openenv", Backend: "fake", Registry: reg}, nil)
	if err == nil || !strings.Contains(err.Error(), "openenv connector is not built yet") {
		t.Errorf("openenv: %v", err)
	}
}
