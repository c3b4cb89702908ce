package rollout_test

import (
	"context"
	"flag"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/builtin"
	"github.com/berth-sh/berth/harbor/agent/terminus"
	"github.com/berth-sh/berth/harbor/job"
	"github.com/berth-sh/berth/internal/testbin"
	"github.com/berth-sh/berth/providers/daytona/daytonatest"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/providers/modal/modaltest"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/rollout"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/serve"
	"github.com/berth-sh/berth/serve/apikeys"
)

var backendFlag = flag.String("backend", "", "run the rollout e2e on this registry entry only (default $HARBOR_ENV_TYPE, else every entry)")

// samplesPerTask is the e2e's samples per prompt, as in Miles's test.
const samplesPerTask = 2

// TestGoldenRollout is the rollout e2e, one case per registry entry: the
// smoke task and the two TB2-style test tasks, 2 samples each, the test
// engine scripted as the golden policy (it answers with each task's
// solution in the terminus format; the agent types it into the sandbox),
// the TITO strict gate on. local runs for real; e2b runs through an
// in-process berth serve over local; daytona and modal against their
// in-process servers. -backend NAME or $HARBOR_ENV_TYPE picks one entry.
func TestGoldenRollout(t *testing.T) {
	want := *backendFlag
	if want == "" {
		want = os.Getenv("HARBOR_ENV_TYPE")
	}
	reg := builtin.Registry()
	if want != "" {
		e, err := reg.Lookup(want)
		if err != nil {
			t.Fatal(err)
		}
		want = e.Name
	}
	for _, e := range reg.Entries() {
		t.Run(e.Name, func(t *testing.T) {
			if want != "" && e.Name != want {
				t.Skipf("the e2e runs on %s only ($HARBOR_ENV_TYPE or -backend)", want)
			}
			qwen3(t)
			env, image := backendEnv(t, e.Name)
			runGolden(t, reg, env, e.Name, image)
		})
	}
}

// backendEnv points the entry at its test server and returns the worker
// environment and the image the tasks run on.
func backendEnv(t *testing.T, name string) (registry.Environ, string) {
	t.Helper()
	home := t.TempDir()
	switch name {
	case "local":
		testbin.NeedLocal(t)
		bin, err := testbin.Berth()
		if err != nil {
			t.Fatal(err)
		}
		state := localState(t, bin)
		return registry.MapEnviron(map[string]string{local.EnvStateDir: state, local.EnvAgentBinary: bin}, home), "berth.local/busybox:latest"
	case "e2b":
		testbin.NeedLocal(t)
		bin, err := testbin.Berth()
		if err != nil {
			t.Fatal(err)
		}
		d, err := local.New(local.Options{StateDir: localState(t, bin), AgentBinary: bin})
		if err != nil {
			t.Fatal(err)
		}
		key := apikeys.Generate()
		keys, _ := apikeys.New(key)
		srv, err := serve.New(serve.Options{Provider: sandbox.NewProvider("local", d), Keys: keys, BaseImage: "berth.local/busybox:latest", MaxSandboxesPerKey: 100})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(srv)
		t.Cleanup(func() { hs.Close(); srv.Close() })
		urls := serve.ClientURLs(hs.URL, "")
		return registry.MapEnviron(map[string]string{"E2B_API_KEY": key, "E2B_API_URL": urls.APIURL, "E2B_SANDBOX_URL": urls.SandboxURL, "E2B_DOMAIN": urls.Domain}, home), "base"
	case "daytona":
		if why := daytonatest.Available(); why != "" {
			t.Skip(why)
		}
		srv, err := daytonatest.New(daytonatest.Options{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if live := srv.Live(); len(live) > 0 {
				t.Errorf("daytona sandboxes left: %v", live)
			}
			srv.Close()
		})
		return registry.MapEnviron(map[string]string{"DAYTONA_API_KEY": srv.APIKey(), "DAYTONA_API_URL": srv.URL()}, home), "busybox:1.36"
	case "modal":
		bb, err := modaltest.Busybox()
		if err != nil {
			t.Skip(err)
		}
		srv := modaltest.New(t, modaltest.Options{Busybox: bb})
		// The SDK reads its server address from the process environment.
		t.Setenv("MODAL_SERVER_URL", srv.URL())
		t.Setenv("MODAL_CONFIG_PATH", filepath.Join(home, "absent.toml"))
		t.Setenv("MODAL_PROFILE", "")
		t.Setenv("MODAL_SANDBOX_V2", "1")
		return registry.MapEnviron(map[string]string{"MODAL_TOKEN_ID": srv.TokenID(), "MODAL_TOKEN_SECRET": srv.TokenSecret(), "MODAL_SERVER_URL": srv.URL()}, home), "alpine"
	}
	t.Skipf("no test server for the %s entry", name)
	return registry.Environ{}, ""
}

// localState is a local provider state dir that must be empty of
// sandboxes when the test ends.
func localState(t *testing.T, bin string) string {
	t.Helper()
	// Short: the agents' socket paths live under it (108-byte limit).
	state, err := os.MkdirTemp("", "berth-rollout-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p, err := local.New(local.Options{StateDir: state, AgentBinary: bin})
		if err == nil {
			if ids, _ := p.Reap(context.Background()); len(ids) > 0 {
				t.Errorf("local sandboxes left: %v", ids)
			}
			p.Close()
		}
		os.RemoveAll(state)
	})
	return state
}

func runGolden(t *testing.T, reg *registry.Registry, env registry.Environ, backend, image string) {
	t.Helper()
	tasks := writeTasks(t, image)
	pe := newPolicyEngine(t, golden(t, tasks))
	jobs := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	res, err := rollout.Run(ctx, rollout.Config{
		Job:      job.Config{JobName: "golden", JobsDir: jobs, TasksPath: tasks, Backend: backend, NConcurrent: 3, NAttempts: samplesPerTask},
		Terminus: terminus.Options{Model: "policy", Shell: "auto"},
		Strict:   true,
	}, rollout.Options{Registry: reg, Env: env, Sessions: pe.client, TokenText: pe.tokenText})
	if err != nil {
		t.Fatalf("rollout with the strict gate: %v", err)
	}
	var sum strings.Builder
	res.Summary.Print(&sum)
	res.Rollout.Print(&sum)
	t.Logf("\n%s", sum.String())
	dirs := trialDirs(t, filepath.Join(jobs, "golden"))
	if len(dirs) != 3*samplesPerTask || res.Rollout.Samples != 3*samplesPerTask {
		t.Fatalf("%d trial dirs, %d samples; want %d", len(dirs), res.Rollout.Samples, 3*samplesPerTask)
	}
	for _, d := range dirs {
		r := trialResult(t, d)
		if r.ExceptionInfo != nil {
			t.Fatalf("%s: %s: %s", d, r.ExceptionInfo.ExceptionType, r.ExceptionInfo.ExceptionMessage)
		}
		if r.Reward() != 1 {
			t.Fatalf("%s: reward %v", d, r.Reward())
		}
		if r.AgentResult.NInputTokens == nil || *r.AgentResult.NInputTokens == 0 || r.AgentResult.Metadata["end"] != terminus.EndTaskComplete {
			t.Fatalf("%s: agent result %+v", d, r.AgentResult)
		}
		ss := readSamples(t, d)
		if len(ss) != 1 {
			t.Fatalf("%s: %d samples", d, len(ss))
		}
		s := ss[0]
		if s.Status != "COMPLETED" || s.Metadata.ExitStatus != rollout.Submitted || s.Reward == nil || *s.Reward != 1 || s.Metadata.Reward != 1 {
			t.Fatalf("%s: sample status %s exit %s reward %v", d, s.Status, s.Metadata.ExitStatus, s.Reward)
		}
		if s.Metadata.Mismatch == nil || s.Metadata.TITOCounters == nil || s.Metadata.AgentMetrics["n_turns"] == nil || s.Metadata.EvalReport["rewards"] == nil {
			t.Fatalf("%s: sample metadata %+v", d, s.Metadata)
		}
		pe.checkSample(t, d, s)
		if _, err := os.Stat(filepath.Join(d, rollout.SafetensorsFile)); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range rollout.GatedMismatches {
		if res.Rollout.MismatchRates[g] != 0 {
			t.Fatalf("mismatch rate %s = %v", g, res.Rollout.MismatchRates[g])
		}
	}
	if n := pe.liveSessions(); n != 0 {
		t.Fatalf("%d sessions left open", n)
	}
	p, err := reg.Open(context.Background(), backend, env, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if left, _ := p.List(context.Background(), map[string]string{"berth.job": "golden"}); len(left) > 0 {
		t.Fatalf("sandboxes left: %v", left)
	}
}
