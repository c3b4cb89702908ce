package rollouttest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/harbor/agent/terminus"
	"github.com/berth-sh/berth/harbor/job"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/results/layout"
	"github.com/berth-sh/berth/rollout"
	"github.com/berth-sh/berth/rollout/agents"
)

// SamplesPerTask is the golden rollout's samples per task, as in Miles's
// test.
const SamplesPerTask = 2

// RunGolden is the rollout e2e on one backend: the smoke task (from
// smokeTask) and the two TB2-style tasks on image, 2 samples each, the test
// engine scripted as the golden policy (it answers with each task's
// solution in the terminus format; the agent types it into the sandbox),
// the TITO strict gate on. It checks that the run passes the gate, that
// every trial directory exists with no exception and reward 1.0, that
// every sample is complete, its loss mask 1 exactly on the model's tokens
// and its tokens the trajectory's conversation, and that no session and no
// sandbox of the job is left.
func RunGolden(t *testing.T, reg *registry.Registry, env registry.Environ, backend, image, smokeTask string) {
	t.Helper()
	tasks := WriteTasks(t, image, smokeTask)
	pe := NewPolicyEngine(t, Golden(t, tasks))
	jobs := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	res, err := rollout.Run(ctx, rollout.Config{
		Job:    job.Config{JobConfig: layout.JobConfig{JobName: "golden", JobsDir: jobs, TasksPath: tasks, Backend: backend, NConcurrent: 3, NAttempts: SamplesPerTask}},
		Agent:  agents.Terminus(terminus.Options{Model: "policy", Shell: "auto"}),
		Strict: true,
	}, rollout.Options{Registry: reg, Env: env, Sessions: pe.Client, TokenText: pe.TokenText})
	if err != nil {
		t.Fatalf("rollout with the strict gate: %v", err)
	}
	var sum strings.Builder
	res.Summary.Print(&sum)
	res.Rollout.Print(&sum)
	t.Logf("\n%s", sum.String())
	dirs := TrialDirs(t, filepath.Join(jobs, "golden"))
	if len(dirs) != 3*SamplesPerTask || res.Rollout.Samples != 3*SamplesPerTask {
		t.Fatalf("%d trial dirs, %d samples; want %d", len(dirs), res.Rollout.Samples, 3*SamplesPerTask)
	}
	for _, d := range dirs {
		r := TrialResult(t, d)
		if r.ExceptionInfo != nil {
			t.Fatalf("%s: %s: %s", d, r.ExceptionInfo.ExceptionType, r.ExceptionInfo.ExceptionMessage)
		}
		if r.Reward() != 1 {
			t.Fatalf("%s: reward %v", d, r.Reward())
		}
		if r.AgentResult.NInputTokens == nil || *r.AgentResult.NInputTokens == 0 || r.AgentResult.Metadata["end"] != terminus.EndTaskComplete {
			t.Fatalf("%s: agent result %+v", d, r.AgentResult)
		}
		ss := ReadSamples(t, d)
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
		pe.CheckSample(t, d, s)
		if _, err := os.Stat(filepath.Join(d, rollout.SafetensorsFile)); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range rollout.GatedMismatches {
		if res.Rollout.MismatchRates[g] != 0 {
			t.Fatalf("mismatch rate %s = %v", g, res.Rollout.MismatchRates[g])
		}
	}
	if n := pe.LiveSessions(); n != 0 {
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
