// Package resultstest writes job directories in the layout berth run
// writes (config.json, result.json, one directory per trial with
// config.json, result.json, trial.log, agent/, verifier/) from short
// specs, for the tests and benchmarks of the results reader and the
// viewer. It uses the types the runner writes (package results/layout),
// so what it writes is what berth writes.
//
// Import it only from tests.
package resultstest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-sh/berth/results/layout"
)

// Trial describes one trial directory.
type Trial struct {
	Task    string
	Attempt int
	// Rewards, when not nil, is the verifier's result.
	Rewards map[string]float64
	// Error is an exception type ("" for none), Message its message.
	Error, Message string
	// Phases are the durations of environment setup, agent setup, agent,
	// verifier and teardown; a negative one did not run. Nil: 1, 0, 2, 1,
	// 0.5 seconds.
	Phases []time.Duration
	// Start is when the trial started (zero: 2026-01-01 00:00 UTC).
	Start time.Time
	// Running leaves out result.json (a trial in progress); TrialLog is
	// written as trial.log.
	Running  bool
	TrialLog string
	// TaskPath is the task directory recorded in config.json.
	TaskPath string
	// Files are more files, by path relative to the trial directory.
	Files map[string]string
	// Name overrides the directory name (<task>__<attempt id>).
	Name string
}

// Reward is a one-reward map.
func Reward(v float64) map[string]float64 { return map[string]float64{"reward": v} }

// Job writes jobsDir/name with its config and result and the trials, and
// returns the job directory. finished sets finished_at; updated is
// result.json's updated_at (zero: now).
func Job(t testing.TB, jobsDir, name string, finished bool, updated time.Time, trials []Trial) string {
	t.Helper()
	dir := filepath.Join(jobsDir, name)
	must(t, os.MkdirAll(dir, 0o755))
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if updated.IsZero() {
		updated = time.Now().UTC()
	}
	cfg := layout.JobConfig{JobName: name, JobsDir: jobsDir, TasksPath: "/tasks", Agent: "oracle", Backend: "local", NConcurrent: 4, NAttempts: 1}
	writeJSON(t, filepath.Join(dir, layout.ConfigFile), cfg)
	res := layout.JobResult{ID: "job-" + name, StartedAt: start, UpdatedAt: updated, NTotalTrials: len(trials)}
	if finished {
		res.FinishedAt = updated
	}
	writeJSON(t, filepath.Join(dir, layout.ResultFile), res)
	for i, tr := range trials {
		WriteTrial(t, dir, i, tr)
	}
	return dir
}

// WriteTrial writes one trial directory into jobDir and returns its name.
func WriteTrial(t testing.TB, jobDir string, i int, s Trial) string {
	t.Helper()
	name := s.Name
	if name == "" {
		name = fmt.Sprintf("%s__%07d", s.Task, i)
	}
	dir := filepath.Join(jobDir, name)
	must(t, os.MkdirAll(filepath.Join(dir, layout.AgentDir), 0o755))
	must(t, os.MkdirAll(filepath.Join(dir, layout.VerifierDir), 0o755))
	if s.Attempt == 0 {
		s.Attempt = 1
	}
	cfg := layout.TrialConfig{TaskPath: s.TaskPath, TrialName: name, Agent: "oracle", Environment: "local", TimeoutMultiplier: 1, Attempt: s.Attempt}
	if cfg.TaskPath == "" {
		cfg.TaskPath = "/tasks/" + s.Task
	}
	writeJSON(t, filepath.Join(dir, layout.ConfigFile), cfg)
	if s.TrialLog != "" {
		must(t, os.WriteFile(filepath.Join(dir, layout.TrialLogFile), []byte(s.TrialLog), 0o644))
	}
	for p, body := range s.Files {
		full := filepath.Join(dir, p)
		must(t, os.MkdirAll(filepath.Dir(full), 0o755))
		must(t, os.WriteFile(full, []byte(body), 0o644))
	}
	if s.Running {
		return name
	}
	start := s.Start
	if start.IsZero() {
		start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	phases := s.Phases
	if phases == nil {
		phases = []time.Duration{time.Second, 0, 2 * time.Second, time.Second, 500 * time.Millisecond}
	}
	r := layout.TrialResult{ID: fmt.Sprintf("id-%d", i), TaskName: s.Task, TrialName: name, Config: cfg,
		AgentInfo: layout.AgentInfo{Name: "oracle", Version: "1.0.0"}, StartedAt: start, SandboxID: "sb-test", Provider: "local"}
	at := start
	slots := []**layout.Timing{&r.EnvironmentSetup, &r.AgentSetup, &r.AgentExecution, &r.Verifier, &r.Teardown}
	for k, d := range phases {
		if d < 0 || k >= len(slots) {
			continue
		}
		*slots[k] = &layout.Timing{StartedAt: at, FinishedAt: at.Add(d)}
		at = at.Add(d)
	}
	r.FinishedAt = at
	if s.Rewards != nil {
		r.VerifierResult = &layout.VerifierResult{Rewards: s.Rewards}
	}
	if s.Error != "" {
		r.ExceptionInfo = &layout.ExceptionInfo{ExceptionType: s.Error, ExceptionMessage: s.Message, OccurredAt: at}
		must(t, os.WriteFile(filepath.Join(dir, layout.ExceptionFile), []byte(s.Error+": "+s.Message+"\n"), 0o644))
	}
	writeJSON(t, filepath.Join(dir, layout.ResultFile), r)
	return name
}

func writeJSON(t testing.TB, p string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	must(t, err)
	must(t, os.WriteFile(p, b, 0o644))
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
