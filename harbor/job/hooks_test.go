package job_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth/harbor/agent"
	"github.com/berth-sh/berth/harbor/job"
	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/internal/testing/harbortest"
	"github.com/berth-sh/berth/results/layout"
	"github.com/berth-sh/berth/sandbox"
)

// recordingHooks fail the first attempt's agent with a transient error,
// then give the oracle, and record every Finished.
type recordingHooks struct {
	mu       sync.Mutex
	made     int
	finished []string // trial name: exception type
}

func (h *recordingHooks) Agent(_ context.Context, t job.TrialInfo) (agent.Agent, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.made++
	if t.Try == 0 {
		return nil, sandbox.Errorf(sandbox.Unavailable, "session server restarting")
	}
	return agent.New("oracle")
}

func (h *recordingHooks) Finished(_ context.Context, t job.TrialInfo, ag agent.Agent, r *trial.Result) {
	h.mu.Lock()
	defer h.mu.Unlock()
	exc := ""
	if r.ExceptionInfo != nil {
		exc = r.ExceptionInfo.ExceptionType
	}
	h.finished = append(h.finished, filepath.Base(t.Dir)+":"+ag.Name()+":"+exc)
}

// Hooks make the agents and hear of every attempt, the retried one too; an
// agent that cannot be made fails its attempt at agent setup, transiently.
func TestHooks(t *testing.T) {
	reg := harbortest.Registry(t, nil)
	tasks := t.TempDir()
	harbortest.Task(t, tasks, "a", harbortest.TOML("30.0", "30.0"), harbortest.SolveWrite, harbortest.TestAnswer, nil)
	h := &recordingHooks{}
	_, sum, err := job.Run(context.Background(), job.Config{
		JobConfig: layout.JobConfig{JobName: "hooks", JobsDir: t.TempDir(), TasksPath: tasks, Backend: "fake", Agent: "custom", MaxRetries: 1, RetryBackoffMin: time.Millisecond, RetryBackoffMax: time.Millisecond}, Limits: fastLimits(),
	}, job.Options{Registry: reg, Env: harbortest.Env(t), Hooks: h})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Passed != 1 || sum.Retries != 1 || h.made != 2 || len(h.finished) != 2 {
		t.Fatalf("summary %+v, %d agents made, finished %v", sum, h.made, h.finished)
	}
	if !strings.HasSuffix(h.finished[0], ":custom:AgentError") || !strings.HasSuffix(h.finished[1], ":oracle:") {
		t.Fatalf("finished %v", h.finished)
	}
}
