package trial_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/harbor/agent"
	"github.com/berth-sh/berth/harbor/task"
	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/internal/testing/harbortest"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/sandbox"
)

func open(t *testing.T) *sandbox.Provider {
	t.Helper()
	reg := harbortest.Registry(t, nil)
	p, err := reg.Open(context.Background(), "fake", harbortest.Env(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func runTrial(t *testing.T, p *sandbox.Provider, taskDir, agentName string) (*trial.Result, string) {
	t.Helper()
	ag, err := agent.New(agentName)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "trial")
	res := trial.Run(context.Background(), trial.Options{
		Task: task.Load(taskDir), Provider: p, Agent: ag, Dir: dir,
		TrialName: "t__abc1234", ID: "id-1", JobID: "job-1", Attempt: 1,
	})
	return res, dir
}

// readResult reads result.json as a tool written for Harbor would: plain
// JSON with Harbor's field names.
func readResult(t *testing.T, dir string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestTrialOutcomes: tasks written as users write them give the
// documented result in result.json, on the fake provider and on the local
// one (real containers).
func TestTrialOutcomes(t *testing.T) {
	t.Run("fake", func(t *testing.T) { trialOutcomes(t, open(t), "host") })
	t.Run("local", func(t *testing.T) { trialOutcomes(t, localProvider(t), local.DefaultImage) })
}

func trialOutcomes(t *testing.T, p *sandbox.Provider, image string) {
	tasks := t.TempDir()
	cases := []struct {
		name, toml, solve, test string
		extra                   map[string]string
		agent                   string
		exception               string
		rewards                 map[string]float64
		verifierRan             bool
	}{
		{name: "pass", solve: harbortest.SolveWrite, test: harbortest.TestAnswer, rewards: map[string]float64{"reward": 1}, verifierRan: true},
		{name: "fail-nop", solve: harbortest.SolveWrite, test: harbortest.TestAnswer, agent: "nop", rewards: map[string]float64{"reward": 0}, verifierRan: true},
		{name: "reward-json", solve: harbortest.SolveWrite, test: harbortest.TestJSON, rewards: map[string]float64{"reward": 0.5, "accuracy": 0.75, "tests_passed": 3}, verifierRan: true},
		{name: "agent-timeout", toml: harbortest.TOMLImage(image, "1.0", "30.0"), solve: harbortest.SolveSleep, test: harbortest.TestAnswer, exception: "AgentTimeoutError", rewards: map[string]float64{"reward": 0}, verifierRan: true},
		{name: "verifier-timeout", toml: harbortest.TOMLImage(image, "30.0", "1.0"), solve: harbortest.SolveWrite, test: harbortest.TestSleep, exception: "VerifierTimeoutError"},
		{name: "missing-reward", solve: harbortest.SolveWrite, test: harbortest.TestNoReward, exception: "RewardFileNotFoundError"},
		{name: "empty-reward", solve: harbortest.SolveWrite, test: harbortest.TestEmpty, exception: "RewardFileEmptyError"},
		{name: "garbage-reward", solve: harbortest.SolveWrite, test: harbortest.TestGarbage, exception: "VerifierOutputParseError"},
		{name: "malformed-toml", toml: "[environment\ndocker_image = 'host'\n", solve: harbortest.SolveWrite, test: harbortest.TestAnswer, exception: "InvalidTaskError"},
		{name: "solution-fails", solve: harbortest.SolveFail, test: harbortest.TestAnswer, rewards: map[string]float64{"reward": 0}, verifierRan: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			toml := strings.ReplaceAll(c.toml, `"host"`, `"`+image+`"`)
			if toml == "" {
				toml = harbortest.TOMLImage(image, "30.0", "30.0")
			}
			agentName := c.agent
			if agentName == "" {
				agentName = "oracle"
			}
			dir := harbortest.Task(t, tasks, c.name, toml, c.solve, c.test, c.extra)
			res, tdir := runTrial(t, p, dir, agentName)
			m := readResult(t, tdir)

			gotExc := ""
			if ei, ok := m["exception_info"].(map[string]any); ok {
				gotExc, _ = ei["exception_type"].(string)
			}
			if gotExc != c.exception {
				t.Fatalf("exception_type = %q, want %q (result: %+v)", gotExc, c.exception, res.ExceptionInfo)
			}
			var gotRewards map[string]float64
			if vr, ok := m["verifier_result"].(map[string]any); ok {
				gotRewards = map[string]float64{}
				for k, v := range vr["rewards"].(map[string]any) {
					gotRewards[k] = v.(float64)
				}
			}
			if len(gotRewards) != len(c.rewards) {
				t.Fatalf("rewards = %v, want %v", gotRewards, c.rewards)
			}
			for k, v := range c.rewards {
				if gotRewards[k] != v {
					t.Errorf("reward %s = %v, want %v", k, gotRewards[k], v)
				}
			}
			if c.verifierRan {
				if _, err := os.Stat(filepath.Join(tdir, "verifier", "test-stdout.txt")); err != nil {
					t.Errorf("verifier output not downloaded: %v", err)
				}
			}
			for _, f := range []string{"config.json", "trial.log"} {
				if _, err := os.Stat(filepath.Join(tdir, f)); err != nil {
					t.Errorf("%s missing: %v", f, err)
				}
			}
			if c.exception != "" {
				if _, err := os.Stat(filepath.Join(tdir, "exception.txt")); err != nil {
					t.Errorf("exception.txt missing: %v", err)
				}
			}
			// Teardown ran: the sandbox is gone.
			if res.SandboxID != "" {
				if _, err := p.Connect(context.Background(), res.SandboxID); !errorsIsNotFound(err) {
					t.Errorf("sandbox %s still there after the trial: %v", res.SandboxID, err)
				}
			}
		})
	}
}

func errorsIsNotFound(err error) bool { return sandbox.ClassOf(err) == sandbox.NotFound }

func TestSolutionExitCodeRecorded(t *testing.T) {
	p := open(t)
	dir := harbortest.Task(t, t.TempDir(), "fails", harbortest.TOML("30.0", "30.0"), harbortest.SolveFail, harbortest.TestAnswer, nil)
	res, tdir := runTrial(t, p, dir, "oracle")
	if res.ExceptionInfo != nil {
		t.Fatalf("a failing solution is not an exception: %+v", res.ExceptionInfo)
	}
	b, err := os.ReadFile(filepath.Join(tdir, "agent", "exit-code.txt"))
	if err != nil || string(b) != "3\n" {
		t.Fatalf("agent/exit-code.txt = %q, %v", b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(tdir, "agent", "oracle.txt")); string(b) != "cannot solve\n" {
		t.Errorf("agent/oracle.txt = %q", b)
	}
}

// TestTeardownOnCancel: cancelling in the middle of the agent phase still
// deletes the sandbox and records the trial as cancelled.
func TestTeardownOnCancel(t *testing.T) {
	p := open(t)
	dir := harbortest.Task(t, t.TempDir(), "slow", harbortest.TOML("60.0", "60.0"), harbortest.SolveSleep, harbortest.TestAnswer, nil)
	ctx, cancel := context.WithCancel(context.Background())
	ag, _ := agent.New("oracle")
	tdir := filepath.Join(t.TempDir(), "trial")
	done := make(chan *trial.Result)
	go func() {
		done <- trial.Run(ctx, trial.Options{Task: task.Load(dir), Provider: p, Agent: ag, Dir: tdir, TrialName: "slow__1", ID: "x", JobID: "j"})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		infos, _ := p.List(context.Background(), map[string]string{trial.LabelTrial: "slow__1"})
		if len(infos) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the trial's sandbox never appeared")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // into the agent phase
	cancel()
	res := <-done
	if res.ExceptionInfo == nil || res.ExceptionInfo.ExceptionType != string(trial.Cancelled) {
		t.Fatalf("exception = %+v, want CancelledError", res.ExceptionInfo)
	}
	if infos, _ := p.List(context.Background(), map[string]string{trial.LabelTrial: "slow__1"}); len(infos) != 0 {
		t.Fatalf("sandbox left after cancel: %+v", infos)
	}
	if res.Teardown == nil {
		t.Error("no teardown timing recorded")
	}
}

// TestLabelsAndTTL: the sandbox carries job and trial labels, and a TTL
// that outlasts the trial's own limits.
func TestLabelsAndTTL(t *testing.T) {
	p := open(t)
	dir := harbortest.Task(t, t.TempDir(), "labels", harbortest.TOML("60.0", "60.0"),
		"#!/bin/sh\nsleep 1\n", harbortest.TestAnswer, nil)
	ag, _ := agent.New("oracle")
	got := make(chan sandbox.Info, 1)
	go func() {
		for range 200 {
			infos, _ := p.List(context.Background(), map[string]string{trial.LabelJob: "job-9"})
			if len(infos) == 1 {
				got <- infos[0]
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		close(got)
	}()
	trial.Run(context.Background(), trial.Options{Task: task.Load(dir), Provider: p, Agent: ag, Dir: filepath.Join(t.TempDir(), "t"), TrialName: "labels__1", ID: "x", JobID: "job-9", TTLMargin: 30 * time.Minute})
	in, ok := <-got
	if !ok {
		t.Fatal("never saw the sandbox")
	}
	if in.Labels[trial.LabelTrial] != "labels__1" || in.Labels[trial.LabelTask] != "labels" {
		t.Errorf("labels = %v", in.Labels)
	}
	// 600 s build + 360 s setup + 60 + 60 + 30 min margin + 1 min.
	want := 600*time.Second + 360*time.Second + 120*time.Second + 31*time.Minute
	if ttl := in.ExpiresAt.Sub(in.CreatedAt); ttl < want-time.Second || ttl > want+time.Second {
		t.Errorf("ttl = %v, want %v", ttl, want)
	}
}

// TestTTLShorterThanTrialRefused: an explicit sandbox lifetime the trial
// could outlive is refused before anything is created.
func TestTTLShorterThanTrialRefused(t *testing.T) {
	p := open(t)
	dir := harbortest.Task(t, t.TempDir(), "long", harbortest.TOML("3600.0", "600.0"), harbortest.SolveWrite, harbortest.TestAnswer, nil)
	ag, _ := agent.New("oracle")
	res := trial.Run(context.Background(), trial.Options{
		Task: task.Load(dir), Provider: p, Agent: ag, Dir: filepath.Join(t.TempDir(), "t"),
		TrialName: "long__1", ID: "x", JobID: "j", TTL: 30 * time.Minute, TTLMargin: 30 * time.Minute,
	})
	if res.ExceptionInfo == nil || res.ExceptionInfo.ExceptionType != string(trial.EnvironmentError) ||
		!strings.Contains(res.ExceptionInfo.ExceptionMessage, "mid-trial") {
		t.Fatalf("exception = %+v", res.ExceptionInfo)
	}
	if res.SandboxID != "" {
		t.Errorf("a sandbox was created: %s", res.SandboxID)
	}
}
