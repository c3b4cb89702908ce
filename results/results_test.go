package results_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth/results"
	"github.com/berth-sh/berth/results/layout"
	"github.com/berth-sh/berth/results/resultstest"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

func open(t *testing.T, dirs ...string) *results.Library {
	t.Helper()
	l, err := results.Open(dirs...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func load(t *testing.T, l *results.Library, name string) *results.Job {
	t.Helper()
	j, err := l.Job(context.Background(), results.Ref{Root: 0, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func sec(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// TestJobStats: rows, counts, mean reward, pass rate, errors by type,
// pass@k per task and phase percentiles come out of a job as written.
func TestJobStats(t *testing.T) {
	jobs := t.TempDir()
	resultstest.Job(t, jobs, "j", true, time.Time{}, []resultstest.Trial{
		{Task: "a", Attempt: 1, Rewards: resultstest.Reward(1), Phases: []time.Duration{sec(1), 0, sec(1), sec(1), sec(1)}},
		{Task: "a", Attempt: 2, Rewards: resultstest.Reward(0), Phases: []time.Duration{sec(2), 0, sec(2), sec(1), sec(1)}},
		{Task: "b", Attempt: 1, Error: "AgentTimeoutError", Rewards: resultstest.Reward(0), Phases: []time.Duration{sec(3), 0, sec(10), sec(1), sec(1)}},
		{Task: "b", Attempt: 2, Error: "RewardFileNotFoundError", Phases: []time.Duration{sec(4), 0, sec(1), sec(1), sec(1)}},
		{Task: "c", Attempt: 1, Rewards: map[string]float64{"accuracy": 0.5}},
		{Task: "c", Attempt: 2, Error: "EnvironmentError", Phases: []time.Duration{sec(5), -1, -1, -1, sec(1)}},
	})
	l := open(t, jobs)
	refs := l.Refs(context.Background())
	if len(refs) != 1 || refs[0].Name != "j" {
		t.Fatalf("refs = %v", refs)
	}
	j := load(t, l, "j")
	if j.Status != results.StatusFinished || j.Agent() != "oracle" || j.Backend() != "local" {
		t.Errorf("job = %s %s %s", j.Status, j.Agent(), j.Backend())
	}
	s := j.Stats
	if s.Trials != 6 || s.Done != 6 || s.Passed != 1 || s.Errored != 3 {
		t.Fatalf("stats = %+v", s)
	}
	if want := 1.5 / 6; math.Abs(s.MeanReward-want) > 1e-12 || math.Abs(s.PassRate-1.0/6) > 1e-12 {
		t.Errorf("mean %v pass rate %v", s.MeanReward, s.PassRate)
	}
	if len(s.Errors) != 3 || s.Errors[0].N != 1 {
		t.Errorf("errors = %v", s.Errors)
	}
	// Rows come sorted by task and attempt, flattened.
	if j.Trials[0].Task != "a" || j.Trials[1].Attempt != 2 || j.Trials[2].ErrorType != "AgentTimeoutError" {
		t.Errorf("rows out of order: %+v", j.Trials[:3])
	}
	if got := j.Trials[2].ExitStatus; got != layout.ExitTimeLimitExceeded {
		t.Errorf("agent timeout exit status = %s", got)
	}
	if got := j.Trials[3].ExitStatus; got != layout.ExitAgentError {
		t.Errorf("no-reward exit status = %s", got)
	}
	if got := j.Trials[0].ExitStatus; got != layout.ExitSubmitted {
		t.Errorf("pass exit status = %s", got)
	}
	if j.Trials[4].Reward != 0.5 || !j.Trials[4].Rewarded {
		t.Errorf("a single reward of another name is the reward: %+v", j.Trials[4])
	}
	if j.Trials[5].Phases[2] != -1 || j.Trials[5].Outcome() != "error" {
		t.Errorf("a phase that never ran: %v %s", j.Trials[5].Phases, j.Trials[5].Outcome())
	}
	// pass@1 per task: a 1/2, b 0, c 0; pass@2: a 1, b 0, c 0.
	if len(s.Ks) != 2 || s.Tasks[0].PassAtK[0] != 0.5 || s.Tasks[0].PassAtK[1] != 1 || s.Tasks[1].PassAtK[1] != 0 {
		t.Errorf("pass@k = %v %+v", s.Ks, s.Tasks)
	}
	if s.PassAtK[0].Key != "pass@1" || math.Abs(s.PassAtK[0].Value-0.5/3) > 1e-12 || math.Abs(s.PassAtK[1].Value-1.0/3) > 1e-12 {
		t.Errorf("job pass@k = %v", s.PassAtK)
	}
	env := s.Phases[0]
	if env.Name != "environment_setup" || len(env.Seconds) != 6 || env.P50 != 2 || env.P95 != 5 {
		t.Errorf("environment phase = %+v", env)
	}
	if agent := s.Phases[2]; len(agent.Seconds) != 5 || agent.P95 != 10 {
		t.Errorf("agent phase = %+v", agent)
	}
}

func TestPassAtK(t *testing.T) {
	for _, c := range []struct {
		n, c, k int
		want    float64
	}{
		{5, 2, 1, 0.4}, {5, 2, 2, 0.7}, {5, 0, 3, 0}, {5, 4, 2, 1}, {10, 3, 5, 1 - 21.0/252}, {1, 1, 1, 1},
	} {
		if got := results.PassAtK(c.n, c.c, c.k); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("PassAtK(%d, %d, %d) = %v, want %v", c.n, c.c, c.k, got, c.want)
		}
	}
	if !math.IsNaN(results.PassAtK(2, 1, 4)) {
		t.Error("pass@4 of 2 attempts is not NaN")
	}
}

func TestQuantile(t *testing.T) {
	v := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if results.Quantile(v, 0.5) != 5 || results.Quantile(v, 0.95) != 10 || results.Quantile(v, 0) != 1 || results.Quantile(nil, 0.5) != 0 {
		t.Error("quantiles wrong")
	}
}

// TestRunningJob: a job without finished_at that wrote recently is
// running, its trials without result.json are running in the phase
// trial.log names; after StaleAfter it is interrupted.
func TestRunningJob(t *testing.T) {
	jobs := t.TempDir()
	resultstest.Job(t, jobs, "live", false, time.Now().UTC(), []resultstest.Trial{
		{Task: "a", Rewards: resultstest.Reward(1)},
		{Task: "b", Running: true, TrialLog: "2026-01-01T00:00:00Z environment_setup: start\n2026-01-01T00:00:01Z environment_setup: done in 1s\n2026-01-01T00:00:01Z agent_execution: start\n"},
	})
	resultstest.Job(t, jobs, "dead", false, time.Now().Add(-2*results.StaleAfter), []resultstest.Trial{{Task: "b", Running: true}})
	l := open(t, jobs)
	j := load(t, l, "live")
	if !j.Live() || j.Stats.Running != 1 || j.Stats.Done != 1 {
		t.Fatalf("live job: %s %+v", j.Status, j.Stats)
	}
	run := j.Trials[1]
	if run.State != results.StateRunning || run.Phase != "agent_execution" || run.Task != "b" {
		t.Errorf("running trial = %+v", run)
	}
	d := load(t, l, "dead")
	if d.Status != results.StatusInterrupted || d.Trials[0].State != results.StateIncomplete {
		t.Errorf("stale job: %s, trial %s", d.Status, d.Trials[0].State)
	}
	// A trial that finishes shows on the next read (the cache notices).
	resultstest.WriteTrial(t, filepath.Join(jobs, "live"), 1, resultstest.Trial{Task: "b", Name: run.Name, Rewards: resultstest.Reward(0)})
	if j = load(t, l, "live"); j.Stats.Done != 2 || j.Trials[1].State != results.StateDone {
		t.Errorf("after the trial finished: %+v", j.Stats)
	}
}

// TestSingleJobDir: a job directory given directly is one job, and its
// siblings are not reachable through it.
func TestSingleJobDir(t *testing.T) {
	jobs := t.TempDir()
	dir := resultstest.Job(t, jobs, "one", true, time.Time{}, []resultstest.Trial{{Task: "a", Rewards: resultstest.Reward(1)}})
	resultstest.Job(t, jobs, "sibling", true, time.Time{}, nil)
	l := open(t, dir)
	refs := l.Refs(context.Background())
	if len(refs) != 1 || refs[0].Name != "one" {
		t.Fatalf("refs = %v", refs)
	}
	if _, err := l.Job(context.Background(), results.Ref{Name: "sibling"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("sibling of a single job dir: %v", err)
	}
}

// TestHostileTrialDir: what a task can leave in its trial directory
// (links out of the jobs directory, links inside it, a FIFO, a huge file,
// odd names) is listed but never followed, blocked on or read whole, and
// route names cannot walk out.
func TestHostileTrialDir(t *testing.T) {
	jobs := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(outside, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	jobDir := resultstest.Job(t, jobs, "j", true, time.Time{}, []resultstest.Trial{{Task: "evil", Name: "evil__1", Rewards: resultstest.Reward(1),
		Files: map[string]string{"agent/oracle.txt": "ok\n", "agent/big.txt": strings.Repeat("A", results.MaxTextBytes+10)}}})
	td := filepath.Join(jobDir, "evil__1")
	for link, target := range map[string]string{
		"agent/shadow": "/etc/shadow", "agent/secret": outside, "agent/up": "../../../../../../../../etc/passwd",
		"agent/inside": "oracle.txt", "agent/dirlink": "/etc", "verifier/reward.txt": outside,
	} {
		if err := os.Symlink(target, filepath.Join(td, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(td, "agent", "fifo.txt"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A trial whose result.json is a link to a file outside, and a trial
	// directory that is itself a link.
	os.MkdirAll(filepath.Join(jobDir, "linked__2"), 0o755)
	os.Symlink(outside, filepath.Join(jobDir, "linked__2", "result.json"))
	os.Symlink(td, filepath.Join(jobDir, "alias__3"))

	l := open(t, jobs)
	ctx := context.Background()
	done := make(chan struct{})
	var d *results.Detail
	var err error
	go func() {
		defer close(done)
		d, err = l.Trial(ctx, results.Ref{Name: "j"}, "evil__1")
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("reading a trial with a FIFO in it hung")
	}
	if err != nil {
		t.Fatal(err)
	}
	j := d.Job
	if len(j.Trials) != 2 {
		t.Fatalf("trials = %d, want 2 (the linked directory is skipped)", len(j.Trials))
	}
	for _, tr := range j.Trials {
		if tr.Name == "linked__2" && (tr.State != results.StateUnreadable || !strings.Contains(tr.Problem, "symbolic link")) {
			t.Errorf("a linked result.json: %+v", tr)
		}
	}
	all := ""
	for _, txt := range append(append(d.AgentOutput, d.VerifierOutput...), d.RewardFiles...) {
		all += string(txt.Data)
		if txt.Name == "agent/big.txt" && (!txt.Truncated || len(txt.Data) != results.MaxTextBytes) {
			t.Errorf("big file: truncated %v, %d bytes", txt.Truncated, len(txt.Data))
		}
	}
	if strings.Contains(all, "host secret") || strings.Contains(all, "root:") {
		t.Fatal("a link out of the jobs directory was followed")
	}
	kinds := map[string]string{}
	for _, e := range d.AgentFiles {
		kinds[e.Name] = e.Kind
	}
	if kinds["agent/shadow"] != "symlink -> /etc/shadow" || kinds["agent/fifo.txt"] != "fifo" || kinds["agent/inside"] != "symlink -> oracle.txt" {
		t.Errorf("listing = %v", kinds)
	}
	for _, c := range []struct {
		trial, path string
		want        error
	}{
		{"evil__1", "agent/shadow", results.ErrSymlink},
		{"evil__1", "agent/secret", results.ErrSymlink},
		{"evil__1", "agent/up", results.ErrSymlink},
		{"evil__1", "agent/inside", results.ErrSymlink},
		{"evil__1", "agent/dirlink/passwd", results.ErrSymlink},
		{"evil__1", "agent/fifo.txt", results.ErrNotRegular},
		{"evil__1", "verifier/reward.txt", results.ErrSymlink},
		{"evil__1", "../../etc/passwd", results.ErrBadPath},
		{"evil__1", "/etc/passwd", results.ErrBadPath},
		{"evil__1", "agent/../../linked__2/result.json", results.ErrBadPath},
		{"..", "etc/passwd", errdefs.ErrNotFound},
		{"alias__3", "agent/oracle.txt", errdefs.ErrNotFound},
		{"evil__1", "agent/none.txt", errdefs.ErrNotFound},
	} {
		txt, err := l.File(ctx, results.Ref{Name: "j"}, c.trial, c.path)
		if !errors.Is(err, c.want) {
			t.Errorf("File(%s, %s) = %v, %v; want %v", c.trial, c.path, txt, err, c.want)
		}
	}
	if txt, err := l.File(ctx, results.Ref{Name: "j"}, "evil__1", "agent/oracle.txt"); err != nil || string(txt.Data) != "ok\n" {
		t.Errorf("plain file: %v %v", txt, err)
	}
	for _, ref := range []results.Ref{{Name: ".."}, {Name: "../j"}, {Name: "j/evil__1"}, {Root: 3, Name: "j"}, {Name: ""}} {
		if _, err := l.Job(ctx, ref); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("Job(%+v) = %v, want not found", ref, err)
		}
	}
}

// TestUnreadableResults: a result.json that does not parse, or is too big
// to read, is a row with the reason; the job still loads.
func TestUnreadableResults(t *testing.T) {
	jobs := t.TempDir()
	jobDir := resultstest.Job(t, jobs, "j", true, time.Time{}, []resultstest.Trial{{Task: "a", Rewards: resultstest.Reward(1)}})
	os.MkdirAll(filepath.Join(jobDir, "cut__1"), 0o755)
	os.WriteFile(filepath.Join(jobDir, "cut__1", "result.json"), []byte(`{"task_name": "x", "verif`), 0o644)
	os.MkdirAll(filepath.Join(jobDir, "huge__2"), 0o755)
	os.WriteFile(filepath.Join(jobDir, "huge__2", "result.json"), []byte(`{"task_name": "`+strings.Repeat("x", results.MaxResultBytes)+`"}`), 0o644)
	os.WriteFile(filepath.Join(jobDir, "result.json"), []byte("{not json"), 0o644)
	j := load(t, open(t, jobs), "j")
	if j.Stats.Unreadable != 2 || j.Stats.Done != 1 || j.ResultErr == "" {
		t.Fatalf("stats %+v, result error %q", j.Stats, j.ResultErr)
	}
	for _, tr := range j.Trials {
		if tr.Name == "huge__2" && !strings.Contains(tr.Problem, "larger than") {
			t.Errorf("huge result.json: %q", tr.Problem)
		}
	}
}

// TestCompare pairs tasks and orders regressions first.
func TestCompare(t *testing.T) {
	jobs := t.TempDir()
	resultstest.Job(t, jobs, "a", true, time.Time{}, []resultstest.Trial{
		{Task: "x", Rewards: resultstest.Reward(1)}, {Task: "y", Rewards: resultstest.Reward(0)}, {Task: "z", Rewards: resultstest.Reward(1)}, {Task: "only-a", Rewards: resultstest.Reward(1)},
	})
	resultstest.Job(t, jobs, "b", true, time.Time{}, []resultstest.Trial{
		{Task: "x", Rewards: resultstest.Reward(0)}, {Task: "y", Rewards: resultstest.Reward(1)}, {Task: "z", Rewards: resultstest.Reward(1)}, {Task: "only-b"},
	})
	l := open(t, jobs)
	c := results.Compare(load(t, l, "a"), load(t, l, "b"))
	if c.Regressed != 1 || c.Improved != 1 || c.Same != 1 || c.OnlyA != 1 || c.OnlyB != 1 || c.MeanDelta != 0 {
		t.Fatalf("comparison = %+v", c)
	}
	if c.Rows[0].Task != "x" || c.Rows[0].Delta != -1 || c.Rows[1].Task != "y" || c.Rows[2].Task != "z" {
		t.Errorf("rows = %+v", c.Rows)
	}
}

// TestDetail: instruction from the task directory, ATIF trajectory, the
// oracle's output, the verifier's output and reward file, the exception.
func TestDetail(t *testing.T) {
	jobs := t.TempDir()
	taskDir := t.TempDir()
	os.WriteFile(filepath.Join(taskDir, "instruction.md"), []byte("Write 42 to /tmp/answer.\n"), 0o644)
	traj := `{"schema_version": "ATIF-v1.4", "session_id": "s1", "agent": {"name": "terminus", "version": "2", "model_name": "m"},
	 "steps": [
	  {"step_id": 1, "source": "user", "message": "Write 42."},
	  {"step_id": 2, "source": "agent", "message": "I will write it.", "reasoning_content": "easy",
	   "tool_calls": [{"tool_call_id": "c1", "function_name": "bash", "arguments": {"command": "echo 42 > /tmp/answer"}},
	                  {"tool_call_id": "c2", "function_name": "read", "arguments": {"path": "/tmp/answer"}}],
	   "observation": {"results": [{"source_call_id": "c1", "content": ""}, {"source_call_id": "c2", "content": "42\n"}]},
	   "metrics": {"prompt_tokens": 10, "completion_tokens": 5}},
	  {"step_id": 3, "source": "agent", "message": [{"type": "text", "text": "done"}]}
	 ]}`
	resultstest.Job(t, jobs, "j", true, time.Time{}, []resultstest.Trial{{Task: "t", Name: "t__1", TaskPath: taskDir,
		Error: "AgentTimeoutError", Message: "exceeded 1s", Rewards: resultstest.Reward(1),
		Files: map[string]string{
			"agent/oracle.txt": "solving\n", "agent/exit-code.txt": "3\n", "agent/trajectory.json": traj,
			"verifier/test-stdout.txt": "PASS 3/3\n", "verifier/reward.txt": "1\n", "samples.jsonl": "{}\n",
		}}})
	d, err := open(t, jobs).Trial(context.Background(), results.Ref{Name: "j"}, "t__1")
	if err != nil {
		t.Fatal(err)
	}
	if d.Instruction.String() != "Write 42 to /tmp/answer.\n" {
		t.Errorf("instruction = %q (%s)", d.Instruction.String(), d.InstructionErr)
	}
	tr := d.Trajectory
	if tr == nil || len(tr.Steps) != 3 || tr.Agent.ModelName != "m" {
		t.Fatalf("trajectory = %+v (%s)", tr, d.TrajectoryErr)
	}
	s := tr.Steps[1]
	if s.Message() != "I will write it." || s.ToolCalls[0].Command() != "echo 42 > /tmp/answer" || s.ToolCalls[1].Command() != "" ||
		!strings.Contains(s.ToolCalls[1].Args(), `"path": "/tmp/answer"`) || s.Observations()[1].Content != "42\n" {
		t.Errorf("step 2 = %q %q %q %+v", s.Message(), s.ToolCalls[0].Command(), s.ToolCalls[1].Args(), s.Observations())
	}
	if !strings.Contains(tr.Steps[2].Message(), `"text": "done"`) {
		t.Errorf("content parts = %q", tr.Steps[2].Message())
	}
	names := []string{}
	for _, txt := range d.AgentOutput {
		names = append(names, txt.Name)
	}
	if strings.Join(names, ",") != "agent/exit-code.txt,agent/oracle.txt" {
		t.Errorf("agent output = %v", names)
	}
	if len(d.VerifierOutput) != 1 || d.VerifierOutput[0].String() != "PASS 3/3\n" || len(d.RewardFiles) != 1 || d.RewardFiles[0].String() != "1\n" {
		t.Errorf("verifier = %v %v", d.VerifierOutput, d.RewardFiles)
	}
	if !strings.HasPrefix(d.Exception.String(), "AgentTimeoutError: exceeded 1s") || !d.Samples {
		t.Errorf("exception %q, samples %v", d.Exception.String(), d.Samples)
	}
	if tl := d.Trial.Timeline(); len(tl) != 5 || tl[2].Name != "agent_execution" || tl[2].Start != time.Second || tl[2].Duration != 2*time.Second {
		t.Errorf("timeline = %+v", tl)
	}
}
