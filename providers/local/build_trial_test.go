package local_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth/harbor/agent"
	"github.com/berth-sh/berth/harbor/task"
	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/sandbox"
)

const dockerfileTaskTOML = `schema_version = "1.1"
[agent]
timeout_sec = 60.0
[verifier]
timeout_sec = 60.0
[environment]
allow_internet = false
build_timeout_sec = 120.0
`

// dockerfileTask writes a Harbor task whose only environment is
// environment/Dockerfile: the oracle's answer and a marker the verifier
// checks both come from the build.
func dockerfileTask(t *testing.T, dockerfile string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "build-task")
	for p, body := range map[string]string{
		"task.toml":                dockerfileTaskTOML,
		"instruction.md":           "Answer the question in /app/question.txt.\n",
		"environment/Dockerfile":   dockerfile,
		"environment/question.txt": "42\n",
		"solution/solve.sh":        "#!/bin/sh\ncat /app/question.txt > /tmp/answer\n",
		"tests/test.sh": "#!/bin/sh\nif [ \"$(cat /tmp/answer)\" = 42 ] && [ -f /app/prepared ]; " +
			"then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n",
	} {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func runOracle(t *testing.T, p *sandbox.Provider, taskDir string) (*trial.Result, map[string]any) {
	t.Helper()
	ag, err := agent.New("oracle")
	if err != nil {
		t.Fatal(err)
	}
	tdir := filepath.Join(t.TempDir(), "trial")
	res := trial.Run(testCtx(t), trial.Options{
		Task: task.Load(taskDir), Provider: p, Agent: ag, Dir: tdir,
		TrialName: "build-task__abc1234", ID: "id-1", JobID: "job-1", Attempt: 1,
	})
	b, err := os.ReadFile(filepath.Join(tdir, "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return res, m
}

// A Harbor task with only environment/Dockerfile runs end to end on local:
// the runner asks for a build, the provider builds it, the oracle solves
// it and the verifier passes. A task whose build fails reads as an
// EnvironmentError naming the Dockerfile's line in result.json.
func TestBuildHarborTrial(t *testing.T) {
	p, _ := buildProvider(t)
	buildStore(t)
	res, m := runOracle(t, p, dockerfileTask(t, `FROM berth.local/busybox:latest
WORKDIR /app
COPY question.txt ./
RUN touch /app/prepared
`))
	if res.ExceptionInfo != nil {
		t.Fatalf("trial failed: %+v", res.ExceptionInfo)
	}
	vr, _ := m["verifier_result"].(map[string]any)
	rewards, _ := vr["rewards"].(map[string]any)
	if rewards["reward"] != 1.0 {
		t.Fatalf("rewards %v, want reward 1", rewards)
	}
	if res.ImageResolution == nil {
		t.Errorf("no image_resolution timing")
	} else {
		t.Logf("image resolution (build) %v", res.ImageResolution.FinishedAt.Sub(res.ImageResolution.StartedAt))
	}
	if _, err := p.Connect(context.Background(), res.SandboxID); sandbox.ClassOf(err) != sandbox.NotFound {
		t.Errorf("sandbox %s still there after the trial: %v", res.SandboxID, err)
	}

	_, m = runOracle(t, p, dockerfileTask(t, "FROM berth.local/busybox:latest\nRUN echo compiling; exit 7\n"))
	ei, _ := m["exception_info"].(map[string]any)
	typ, _ := ei["exception_type"].(string)
	msg, _ := ei["exception_message"].(string)
	t.Logf("result.json exception: %s: %s", typ, msg)
	if typ != string(trial.EnvironmentError) || !strings.Contains(msg, "Dockerfile:2") || !strings.Contains(msg, "exit status 7") || !strings.Contains(msg, "compiling") {
		t.Errorf("failed build in result.json: %q %q", typ, msg)
	}
}
