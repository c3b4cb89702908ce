package job_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-sh/berth/harbor/job"
	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/internal/testing/fakeprovider"
	"github.com/berth-sh/berth/internal/testing/harbortest"
	"github.com/berth-sh/berth/results/layout"
	"github.com/berth-sh/berth/sandbox"
)

func readJSON(t testing.TB, p string, v any) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
}

func trialDirs(t *testing.T, jobDir string) []string {
	t.Helper()
	ents, err := os.ReadDir(jobDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, filepath.Join(jobDir, e.Name()))
		}
	}
	return out
}

func fastLimits() sandbox.Limits {
	return sandbox.Limits{BackoffBase: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond}
}

func TestJobResults(t *testing.T) {
	reg := harbortest.Registry(t, nil)
	tasks := t.TempDir()
	harbortest.Task(t, tasks, "a-pass", harbortest.TOML("30.0", "30.0"), harbortest.SolveWrite, harbortest.TestAnswer, nil)
	harbortest.Task(t, tasks, "b-json", harbortest.TOML("30.0", "30.0"), harbortest.SolveWrite, harbortest.TestJSON, nil)
	harbortest.Task(t, tasks, "c-noreward", harbortest.TOML("30.0", "30.0"), harbortest.SolveWrite, harbortest.TestNoReward, nil)
	harbortest.Task(t, tasks, "d-skipped", harbortest.TOML("30.0", "30.0"), harbortest.SolveWrite, harbortest.TestAnswer, nil)
	jobs := t.TempDir()
	var events sync.Map
	res, sum, err := job.Run(context.Background(), job.Config{
		JobConfig: layout.JobConfig{JobName: "j1", JobsDir: jobs, TasksPath: tasks, Backend: "fake", NConcurrent: 3, NAttempts: 2, Exclude: []string{"d-*"}}, Limits: fastLimits(),
	}, job.Options{Registry: reg, Env: harbortest.Env(t), Events: func(e job.Event) {
		n, _ := events.LoadOrStore(e.Type, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.NTotalTrials != 6 || res.Stats.NCompleted != 4 || res.Stats.NErrored != 2 {
		t.Fatalf("stats = %+v (total %d)", res.Stats, res.NTotalTrials)
	}
	// The file on disk says the same, with Harbor's field names.
	var onDisk map[string]any
	readJSON(t, filepath.Join(jobs, "j1", "result.json"), &onDisk)
	stats := onDisk["stats"].(map[string]any)
	if stats["n_completed_trials"].(float64) != 4 || stats["n_errored_trials"].(float64) != 2 || onDisk["finished_at"] == nil {
		t.Fatalf("result.json = %v", onDisk)
	}
	evals := stats["evals"].(map[string]any)
	ev := evals["oracle__none__"+filepath.Base(tasks)].(map[string]any)
	mean := ev["metrics"].([]any)[0].(map[string]any)["mean"].(float64)
	// a-pass 1.0 x2, b-json 0.5 x2, c-noreward 0 x2: mean 0.5.
	if mean != 0.5 {
		t.Errorf("mean reward = %v, want 0.5", mean)
	}
	if exc := ev["exception_stats"].(map[string]any)["RewardFileNotFoundError"].([]any); len(exc) != 2 {
		t.Errorf("exception_stats = %v", ev["exception_stats"])
	}
	if len(trialDirs(t, filepath.Join(jobs, "j1"))) != 6 {
		t.Errorf("want 6 trial directories")
	}
	for _, name := range []string{"config.json", "job.log"} {
		if _, err := os.Stat(filepath.Join(jobs, "j1", name)); err != nil {
			t.Error(err)
		}
	}
	if sum.Trials != 6 || sum.Passed != 2 || sum.Errors["RewardFileNotFoundError"] != 2 {
		t.Errorf("summary = %+v", sum)
	}
	if _, ok := sum.Phases[layout.PhaseVerifier]; !ok {
		t.Errorf("summary has no verifier percentiles: %+v", sum.Phases)
	}
	for _, typ := range []string{job.EventJobStarted, job.EventTrialStarted, job.EventTrialFinished, job.EventJobFinished} {
		if _, ok := events.Load(typ); !ok {
			t.Errorf("no %s event", typ)
		}
	}
	var out strings.Builder
	sum.Print(&out)
	if !strings.Contains(out.String(), "6 trials: 2 passed, mean reward 0.500") || !strings.Contains(out.String(), "RewardFileNotFoundError 2") {
		t.Errorf("summary text:\n%s", out.String())
	}
	// The same name again is refused, pointing at --resume.
	if _, _, err := job.Run(context.Background(), job.Config{JobConfig: layout.JobConfig{JobName: "j1", JobsDir: jobs, TasksPath: tasks, Backend: "fake"}}, job.Options{Registry: reg, Env: harbortest.Env(t)}); err == nil || !strings.Contains(err.Error(), "--resume") {
		t.Errorf("rerun of an existing job: %v", err)
	}
}

// TestInfraErrorsRetried: Unavailable creates are retried (by the create
// gate and by the job), an agent timeout never is.
func TestInfraErrorsRetried(t *testing.T) {
	faults := fakeprovider.NewInjector(fakeprovider.Faults{})
	reg := harbortest.Registry(t, faults)
	tasks := t.TempDir()
	harbortest.Task(t, tasks, "ok", harbortest.TOML("30.0", "30.0"), harbortest.SolveWrite, harbortest.TestAnswer, nil)
	var fails atomic.Int64
	faults.Set(fakeprovider.Faults{FailCreate: sandbox.Errorf(sandbox.Unavailable, "injected outage")})
	go func() {
		// Heal after a few failed creates.
		for fails.Load() < 3 {
			time.Sleep(5 * time.Millisecond)
			fails.Add(1)
		}
		faults.Set(fakeprovider.Faults{})
	}()
	res, _, err := job.Run(context.Background(), job.Config{
		JobConfig: layout.JobConfig{JobName: "retry", JobsDir: t.TempDir(), TasksPath: tasks, Backend: "fake"}, Limits: fastLimits(),
	}, job.Options{Registry: reg, Env: harbortest.Env(t)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stats.NCompleted != 1 || res.Stats.NErrored != 0 {
		t.Fatalf("a transient outage failed the trial: %+v", res.Stats)
	}

	// A quota that stays used up is not retried forever: the trial fails
	// with the provider's words.
	faults.Set(fakeprovider.Faults{FailCreate: sandbox.WithPermanent(sandbox.Errorf(sandbox.ResourceExhausted, "Total disk limit exceeded"))})
	jobs := t.TempDir()
	res, _, err = job.Run(context.Background(), job.Config{
		JobConfig: layout.JobConfig{JobName: "quota", JobsDir: jobs, TasksPath: tasks, Backend: "fake", MaxRetries: 3, RetryBackoffMin: time.Millisecond, RetryBackoffMax: 2 * time.Millisecond}, Limits: fastLimits(),
	}, job.Options{Registry: reg, Env: harbortest.Env(t)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stats.NErrored != 1 || res.Stats.NRetries != 0 {
		t.Fatalf("quota: %+v", res.Stats)
	}
	var tr trial.Result
	readJSON(t, filepath.Join(trialDirs(t, filepath.Join(jobs, "quota"))[0], "result.json"), &tr)
	if !strings.Contains(tr.ExceptionInfo.ExceptionMessage, "Total disk limit exceeded") {
		t.Errorf("exception = %+v", tr.ExceptionInfo)
	}

	// Transient failures that outlast the gate are retried by the job.
	faults.Set(fakeprovider.Faults{FailCreate: sandbox.Errorf(sandbox.Unavailable, "down")})
	res, _, err = job.Run(context.Background(), job.Config{
		JobConfig: layout.JobConfig{JobName: "jobretry", JobsDir: t.TempDir(), TasksPath: tasks, Backend: "fake", MaxRetries: 2, RetryBackoffMin: time.Millisecond, RetryBackoffMax: 2 * time.Millisecond}, Limits: sandbox.Limits{Retries: -1},
	}, job.Options{Registry: reg, Env: harbortest.Env(t)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stats.NRetries != 2 || res.Stats.NErrored != 1 {
		t.Fatalf("job retries: %+v", res.Stats)
	}

	// Timeouts are answers: never retried.
	faults.Set(fakeprovider.Faults{})
	tasks2 := t.TempDir()
	harbortest.Task(t, tasks2, "slow", harbortest.TOML("0.5", "30.0"), harbortest.SolveSleep, harbortest.TestAnswer, nil)
	res, _, err = job.Run(context.Background(), job.Config{
		JobConfig: layout.JobConfig{JobName: "timeout", JobsDir: t.TempDir(), TasksPath: tasks2, Backend: "fake", MaxRetries: 3},
	}, job.Options{Registry: reg, Env: harbortest.Env(t)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stats.NRetries != 0 || res.Stats.NErrored != 1 {
		t.Fatalf("agent timeout was retried: %+v", res.Stats)
	}
}

// TestCancelThenResume: cancelling a job mid-way leaves no sandbox, marks
// the rest cancelled and writes result.json; --resume completes it.
func TestCancelThenResume(t *testing.T) {
	reg := harbortest.Registry(t, nil)
	tasks := t.TempDir()
	for i := range 12 {
		harbortest.Task(t, tasks, fmt.Sprintf("t%02d", i), harbortest.TOML("30.0", "30.0"), "#!/bin/sh\nsleep 0.3\necho 42 > /tmp/answer\n", harbortest.TestAnswer, nil)
	}
	jobs := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var finished atomic.Int64
	opts := job.Options{Registry: reg, Env: harbortest.Env(t), Events: func(e job.Event) {
		if e.Type == job.EventTrialFinished && finished.Add(1) == 3 {
			cancel()
		}
	}}
	res, _, err := job.Run(ctx, job.Config{JobConfig: layout.JobConfig{JobName: "c", JobsDir: jobs, TasksPath: tasks, Backend: "fake", NConcurrent: 2}}, opts)
	if err == nil {
		t.Fatal("a cancelled job returned no error")
	}
	if res.Stats.NCancelled == 0 || res.Stats.NCompleted+res.Stats.NCancelled+res.Stats.NErrored != 12 {
		t.Fatalf("after cancel: %+v", res.Stats)
	}
	p, err := reg.Open(context.Background(), "fake", harbortest.Env(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if left, _ := p.List(context.Background(), map[string]string{trial.LabelJob: "c"}); len(left) != 0 {
		t.Fatalf("sandboxes left after cancel: %v", left)
	}
	var onDisk layout.JobResult
	readJSON(t, filepath.Join(jobs, "c", "result.json"), &onDisk)
	if onDisk.FinishedAt.IsZero() || onDisk.Stats.NCancelled != res.Stats.NCancelled {
		t.Errorf("result.json after cancel: %+v", onDisk)
	}

	res, _, err = job.Resume(context.Background(), filepath.Join(jobs, "c"), job.Options{Registry: reg, Env: harbortest.Env(t)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stats.NCompleted != 12 || res.Stats.NCancelled != 0 {
		for _, e := range res.Stats.Evals {
			t.Logf("exceptions: %v", e.ExceptionStats)
		}
		for _, d := range trialDirs(t, filepath.Join(jobs, "c")) {
			if b, err := os.ReadFile(filepath.Join(d, "exception.txt")); err == nil {
				t.Logf("%s: %s", filepath.Base(d), b)
			}
		}
		t.Fatalf("after resume: %+v", res.Stats)
	}
	if n := len(trialDirs(t, filepath.Join(jobs, "c"))); n != 12 {
		t.Errorf("trial directories after resume = %d, want 12", n)
	}
}

// TestResumeToleratesTruncatedResult: a result.json cut short by a crash
// does not stop a resume.
func TestResumeToleratesTruncatedResult(t *testing.T) {
	reg := harbortest.Registry(t, nil)
	tasks := t.TempDir()
	harbortest.Task(t, tasks, "one", harbortest.TOML("30.0", "30.0"), harbortest.SolveWrite, harbortest.TestAnswer, nil)
	jobs := t.TempDir()
	if _, _, err := job.Run(context.Background(), job.Config{JobConfig: layout.JobConfig{JobName: "r", JobsDir: jobs, TasksPath: tasks, Backend: "fake", NAttempts: 2}}, job.Options{Registry: reg, Env: harbortest.Env(t)}); err != nil {
		t.Fatal(err)
	}
	dirs := trialDirs(t, filepath.Join(jobs, "r"))
	// One trial's result is lost (a crash mid-trial), the job's is cut.
	os.Remove(filepath.Join(dirs[0], "result.json"))
	os.WriteFile(filepath.Join(jobs, "r", "result.json"), []byte(`{"id": "abc", "stats": {`), 0o644)
	res, _, err := job.Resume(context.Background(), filepath.Join(jobs, "r"), job.Options{Registry: reg, Env: harbortest.Env(t)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stats.NCompleted != 2 || len(trialDirs(t, filepath.Join(jobs, "r"))) != 2 {
		t.Fatalf("resume: %+v", res.Stats)
	}
}
