package trial_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/berth-sh/berth/harbor/agent"
	"github.com/berth-sh/berth/harbor/task"
	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/internal/testing/harbortest"
	"github.com/berth-sh/berth/sandbox"
)

// reporting is an agent that leaves a link in /logs/agent where its
// trajectory goes, fails as told, and reports.
type reporting struct {
	err error
}

func (reporting) Name() string                           { return "reporting" }
func (reporting) Version() string                        { return "1" }
func (reporting) Setup(context.Context, agent.Env) error { return nil }
func (r reporting) Run(ctx context.Context, env agent.Env) error {
	// The sandbox is hostile: a link where the report's file goes.
	if _, err := env.Sandbox.Run(ctx, sandbox.Command{Args: []string{"sh", "-c", "mkdir -p /logs/agent && ln -sf /etc/passwd /logs/agent/trajectory.json"}}); err != nil {
		return err
	}
	return r.err
}
func (reporting) Report() agent.Report {
	in, out := int64(10), int64(3)
	return agent.Report{InputTokens: &in, OutputTokens: &out, ModelInfo: map[string]string{"name": "m"},
		Metadata: map[string]any{"n_turns": 2},
		Files:    map[string][]byte{"trajectory.json": []byte(`{"steps":[]}`), "../escape.json": []byte("x")}}
}

func TestAgentReportAndFailureKinds(t *testing.T) {
	p := open(t)
	dir := t.TempDir()
	taskDir := harbortest.Task(t, dir, "rep", harbortest.TOML("10", "10"), harbortest.SolveWrite, harbortest.TestAnswer, nil)
	for _, tc := range []struct {
		name string
		err  error
		kind trial.Kind
	}{
		{"clean", nil, ""},
		{"context full", errors.Join(agent.ErrContextLength, errors.New("cut")), trial.ContextLengthExceeded},
		{"sandbox", &agent.SandboxError{Err: sandbox.Errorf(sandbox.Unavailable, "exec failed")}, trial.EnvironmentError},
		{"model", &agent.ModelError{Err: sandbox.Errorf(sandbox.ResourceExhausted, "429")}, trial.ModelError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := filepath.Join(t.TempDir(), "trial")
			res := trial.Run(context.Background(), trial.Options{Task: task.Load(taskDir), Provider: p, Agent: reporting{err: tc.err}, Dir: td, TrialName: "rep__x", ID: "i"})
			if got := trial.Kind(""); res.ExceptionInfo != nil {
				got = trial.Kind(res.ExceptionInfo.ExceptionType)
				if got != tc.kind {
					t.Fatalf("kind %s, want %s", got, tc.kind)
				}
			} else if tc.kind != "" {
				t.Fatalf("no exception, want %s", tc.kind)
			}
			// Verification runs whatever the agent did.
			if res.VerifierResult == nil {
				t.Fatal("the verifier did not run")
			}
			// Transient classes are retried by a job; the others are not.
			if want := tc.kind == trial.EnvironmentError || tc.kind == trial.ModelError; res.Retryable() != want {
				t.Fatalf("retryable %v", res.Retryable())
			}
			m := readResult(t, td)
			ar := m["agent_result"].(map[string]any)
			if ar["n_input_tokens"] != float64(10) || ar["n_output_tokens"] != float64(3) || ar["metadata"].(map[string]any)["n_turns"] != float64(2) {
				t.Fatalf("agent_result %v", ar)
			}
			if m["agent_info"].(map[string]any)["model_info"].(map[string]any)["name"] != "m" {
				t.Fatalf("agent_info %v", m["agent_info"])
			}
			fi, err := os.Lstat(filepath.Join(td, "agent", "trajectory.json"))
			if err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("trajectory.json: %v %v", fi, err)
			}
			if b, _ := os.ReadFile(filepath.Join(td, "agent", "trajectory.json")); string(b) != `{"steps":[]}` {
				t.Fatalf("trajectory.json holds %q", b)
			}
			if _, err := os.Stat(filepath.Join(td, "escape.json")); err == nil {
				t.Fatal("a report file escaped agent/")
			}
		})
	}
}
