package rollout_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-sh/berth/harbor/agent/terminus"
	"github.com/berth-sh/berth/harbor/job"
	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/internal/testing/harbortest"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/results/layout"
	"github.com/berth-sh/berth/rollout"
	"github.com/berth-sh/berth/rollout/agents"
	"github.com/berth-sh/berth/rollout/policy"
	"github.com/berth-sh/berth/rollout/rollouttest"
	"github.com/berth-sh/berth/session/testengine"
)

// fakeRun is a rollout of the test tasks on the fault-injecting fake
// provider (chrooted busybox sandboxes), 2 samples per task.
type fakeRun struct {
	reg   *registry.Registry
	env   registry.Environ
	tasks string
	jobs  string
	pe    *rollouttest.PolicyEngine
}

func newFakeRun(t *testing.T, script func(tasks string) testengine.Script) *fakeRun {
	t.Helper()
	rollouttest.Qwen3(t)
	f := &fakeRun{reg: harbortest.Registry(t, nil), env: harbortest.Env(t), jobs: t.TempDir()}
	f.tasks = rollouttest.WriteTasks(t, "host", "../smoke/builtin-task")
	f.pe = rollouttest.NewPolicyEngine(t, script(f.tasks))
	return f
}

func (f *fakeRun) run(ctx context.Context, t *testing.T, mod func(*rollout.Config)) (*rollout.Result, error) {
	t.Helper()
	cfg := rollout.Config{
		Job:    job.Config{JobConfig: layout.JobConfig{JobName: "r", JobsDir: f.jobs, TasksPath: f.tasks, Backend: "fake", NConcurrent: 3, NAttempts: rollouttest.SamplesPerTask}},
		Agent:  agents.Terminus(terminus.Options{Model: "policy", Shell: "pipe", RetryDelay: 20 * time.Millisecond}),
		Strict: true,
	}
	if mod != nil {
		mod(&cfg)
	}
	res, err := rollout.Run(ctx, cfg, rollout.Options{Registry: f.reg, Env: f.env, Sessions: f.pe.Client, TokenText: f.pe.TokenText})
	if res != nil && res.Rollout != nil {
		var b strings.Builder
		res.Rollout.Print(&b)
		t.Logf("\n%s", b.String())
	}
	return res, err
}

// leftovers fails the test when a sandbox or a session outlived the run.
func (f *fakeRun) leftovers(t *testing.T) {
	t.Helper()
	if n := f.pe.LiveSessions(); n != 0 {
		t.Fatalf("%d sessions left open", n)
	}
	p, err := f.reg.Open(context.Background(), "fake", f.env, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if left, _ := p.List(context.Background(), map[string]string{trial.LabelJob: "r"}); len(left) > 0 {
		t.Fatalf("sandboxes left: %v", left)
	}
}

func (f *fakeRun) dirs(t *testing.T) []string {
	return rollouttest.TrialDirs(t, filepath.Join(f.jobs, "r"))
}

// A policy that does the wrong thing gets reward 0 on every trial, and its
// samples are complete all the same.
func TestWrongPolicy(t *testing.T) {
	f := newFakeRun(t, func(string) testengine.Script { return policy.Wrong })
	res, err := f.run(t.Context(), t, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Rollout.Samples != 6 || res.Rollout.MeanReward != 0 || res.Rollout.Statuses["COMPLETED"] != 6 {
		t.Fatalf("summary %+v", res.Rollout)
	}
	for _, d := range f.dirs(t) {
		if r := rollouttest.TrialResult(t, d); r.ExceptionInfo != nil || r.VerifierResult == nil || r.Reward() != 0 {
			t.Fatalf("%s: %+v %+v", d, r.ExceptionInfo, r.VerifierResult)
		}
		s := rollouttest.ReadSamples(t, d)[0]
		if s.Status != "COMPLETED" || s.Metadata.ExitStatus != rollout.Submitted || *s.Reward != 0 {
			t.Fatalf("%s: %s %s %v", d, s.Status, s.Metadata.ExitStatus, *s.Reward)
		}
		f.pe.CheckSample(t, d, s)
	}
	f.leftovers(t)
}

// A policy that talks past the context ends its trial as
// SequenceLengthLimitExceeded, with a TRUNCATED sample; the verifier still
// grades the sandbox, and the strict gate checks the cut sessions too.
func TestContextOverrun(t *testing.T) {
	f := newFakeRun(t, func(string) testengine.Script { return policy.Overrun })
	res, err := f.run(t.Context(), t, func(c *rollout.Config) { c.MaxSeqLen = 2048 })
	if err != nil {
		t.Fatal(err)
	}
	if res.Rollout.ExitStatuses[rollout.SequenceLengthLimitExceeded] != 6 || res.Rollout.Statuses["TRUNCATED"] != 6 || res.Rollout.Checked != 6 {
		t.Fatalf("summary %+v", res.Rollout)
	}
	for _, d := range f.dirs(t) {
		r := rollouttest.TrialResult(t, d)
		if r.ExceptionInfo == nil || r.ExceptionInfo.ExceptionType != string(trial.ContextLengthExceeded) || r.VerifierResult == nil {
			t.Fatalf("%s: %+v", d, r.ExceptionInfo)
		}
		s := rollouttest.ReadSamples(t, d)[0]
		if s.Status != "TRUNCATED" || s.Metadata.ExitStatus != rollout.SequenceLengthLimitExceeded || len(s.Tokens) > 2048 {
			t.Fatalf("%s: %s %s, %d tokens", d, s.Status, s.Metadata.ExitStatus, len(s.Tokens))
		}
		f.pe.CheckSample(t, d, s)
	}
	f.leftovers(t)
}

// The engine answers 500 to the second call of every session: the agent
// retries it, and no sample shows a trace of it.
func TestEngineFailsOneTurn(t *testing.T) {
	var failed atomic.Int32
	f := newFakeRun(t, func(tasks string) testengine.Script {
		return policy.Failing(rollouttest.Golden(t, tasks), func(c testengine.Call) bool {
			if c.N == 2 {
				failed.Add(1)
				return true
			}
			return false
		})
	})
	res, err := f.run(t.Context(), t, nil)
	if err != nil {
		t.Fatal(err)
	}
	if failed.Load() != 6 || res.Rollout.MeanReward != 1 || res.Rollout.Statuses["COMPLETED"] != 6 {
		t.Fatalf("%d failures; summary %+v", failed.Load(), res.Rollout)
	}
	for _, d := range f.dirs(t) {
		r := rollouttest.TrialResult(t, d)
		if r.ExceptionInfo != nil || r.Reward() != 1 {
			t.Fatalf("%s: %+v reward %v", d, r.ExceptionInfo, r.Reward())
		}
		turns := r.AgentResult.Metadata["turns"].([]any)
		if a := turns[1].(map[string]any)["attempts"]; a != float64(2) {
			t.Fatalf("%s: the failed turn took %v attempts", d, a)
		}
		f.pe.CheckSample(t, d, rollouttest.ReadSamples(t, d)[0])
	}
	f.leftovers(t)
}

// The sandboxes of one task are deleted in the middle of their episodes:
// those trials are ABORTED with the reason, the others finish. A trial's
// own turn deletes every sandbox of the task, so that trial is in its
// agent phase (EnvironmentError); the task's other trial may already be
// verifying (VerifierError, with the sandbox's absence as the reason).
func TestSandboxDeletedMidEpisode(t *testing.T) {
	const victim = "berth_csv-total" // the task's label value
	var f *fakeRun
	var once sync.Map
	f = newFakeRun(t, func(tasks string) testengine.Script {
		g := rollouttest.Golden(t, tasks)
		return func(c testengine.Call) testengine.Reply {
			if c.N == 2 && strings.Contains(string(c.Body["messages"]), "/app/total.sh") {
				if _, done := once.LoadOrStore(c.RoutingKey, true); !done {
					p, err := f.reg.Open(context.Background(), "fake", f.env, nil)
					if err == nil {
						infos, _ := p.List(context.Background(), map[string]string{trial.LabelTask: victim})
						for _, in := range infos {
							p.Delete(context.Background(), in.ID)
						}
						p.Close()
					}
				}
				return testengine.Reply{Text: policy.Answer("Checking.", []string{"cat /app/total.txt\n"}, 5, false)}
			}
			return g(c)
		}
	})
	res, err := f.run(t.Context(), t, func(c *rollout.Config) { c.Strict = false })
	if err != nil {
		t.Fatal(err)
	}
	aborted, inAgent := 0, 0
	for _, d := range f.dirs(t) {
		r := rollouttest.TrialResult(t, d)
		s := rollouttest.ReadSamples(t, d)[0]
		if strings.HasPrefix(filepath.Base(d), "csv-total") {
			aborted++
			if r.ExceptionInfo == nil {
				t.Fatalf("%s: no exception", d)
			}
			switch r.ExceptionInfo.ExceptionType {
			case string(trial.EnvironmentError):
				// The agent's next exec finds the sandbox gone, or its
				// shell ends under it (a delete racing a restart).
				inAgent++
				if !strings.HasPrefix(s.Metadata.AbortReason, "EnvironmentError: sandbox: ") {
					t.Fatalf("%s: reason %q", d, s.Metadata.AbortReason)
				}
			case string(trial.VerifierError):
				if !strings.HasPrefix(s.Metadata.AbortReason, "VerifierError: ") || !strings.Contains(s.Metadata.AbortReason, "does not exist") {
					t.Fatalf("%s: reason %q", d, s.Metadata.AbortReason)
				}
			default:
				t.Fatalf("%s: %+v", d, r.ExceptionInfo)
			}
			if s.Status != "ABORTED" {
				t.Fatalf("%s: sample %s, reason %q", d, s.Status, s.Metadata.AbortReason)
			}
			continue
		}
		if r.ExceptionInfo != nil || r.Reward() != 1 || s.Status != "COMPLETED" {
			t.Fatalf("%s: %+v reward %v status %s", d, r.ExceptionInfo, r.Reward(), s.Status)
		}
	}
	if inAgent == 0 {
		t.Fatal("no trial of the task saw its sandbox go in its agent phase")
	}
	if aborted != rollouttest.SamplesPerTask || len(res.Rollout.Aborted) != rollouttest.SamplesPerTask || res.Rollout.Samples != 6 {
		t.Fatalf("%d aborted trials; summary %+v", aborted, res.Rollout)
	}
	f.leftovers(t)
}

// Cancelling the rollout's context in the middle tears every sandbox down
// and closes every session; what was running is ABORTED, nothing is lost.
func TestCancelledRollout(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var calls atomic.Int32
	f := newFakeRun(t, func(string) testengine.Script {
		return func(c testengine.Call) testengine.Reply {
			if calls.Add(1) == 3 {
				time.AfterFunc(500*time.Millisecond, cancel) // while the sleeps run
			}
			return testengine.Reply{Text: policy.Answer("Waiting.", []string{"sleep 30\n"}, 60, false)}
		}
	})
	start := time.Now()
	res, err := f.run(ctx, t, func(c *rollout.Config) { c.Job.NConcurrent = 3 })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("rollout after cancel: %v", err)
	}
	if time.Since(start) > 25*time.Second {
		t.Fatalf("the cancel took %v", time.Since(start))
	}
	f.leftovers(t)
	dirs := f.dirs(t)
	if len(dirs) == 0 || res.Job.Stats.NCancelled != 6 {
		t.Fatalf("%d trial dirs, stats %+v", len(dirs), res.Job.Stats)
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "result.json")); err != nil {
			t.Fatal(err)
		}
		if s := rollouttest.ReadSamples(t, d)[0]; s.Status != "ABORTED" || !strings.Contains(s.Metadata.AbortReason, "CancelledError") {
			t.Fatalf("%s: %s %q", d, s.Status, s.Metadata.AbortReason)
		}
	}
}
