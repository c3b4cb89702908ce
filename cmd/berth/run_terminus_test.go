package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/berth-sh/berth/harbor/task"
	"github.com/berth-sh/berth/internal/hfref"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/rollout/policy"
	"github.com/berth-sh/berth/session/engine"
	"github.com/berth-sh/berth/session/testengine"
	"github.com/berth-sh/berth/session/tito"
)

const terminusKey = "sk-SECRET-run-terminus-71aa"

// berth run -a terminus evaluates a model behind a plain OpenAI-compatible
// endpoint (the test engine in its OpenAI dialect, scripted as the golden
// policy) on local, in Harbor's layout, with the agent's tokens and
// trajectory in each trial; the key from --api-key-file reaches the
// endpoint and nothing else.
func TestRunTerminus(t *testing.T) {
	_, state := localState(t)
	c, err := tito.LoadCodec(hfref.RequireQwen3(t), "qwen3", "")
	if err != nil {
		t.Fatal(err)
	}

	work := t.TempDir()
	tasksDir := filepath.Join(work, "tasks")
	for i := range 2 {
		writeSleepTask(t, filepath.Join(tasksDir, fmt.Sprintf("task-%d", i)))
	}
	tasks, err := task.LoadDir(tasksDir)
	if err != nil {
		t.Fatal(err)
	}
	sol, err := policy.Solutions(tasks, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	te, err := testengine.New(c.Tok, policy.Golden(tasks, sol), testengine.Options{Dialect: engine.OpenAI})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	auth := map[string]int{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth[r.Header.Get("Authorization")]++
		mu.Unlock()
		te.ServeHTTP(w, r)
	}))
	defer ts.Close()
	keyFile := filepath.Join(work, "key")
	os.WriteFile(keyFile, []byte(terminusKey+"\n"), 0o600)

	var stdout, stderr bytes.Buffer
	env := registry.MapEnviron(map[string]string{local.EnvStateDir: state, local.EnvAgentBinary: agentFor(t)}, work)
	code := run([]string{"run", "-p", tasksDir, "-a", "terminus", "--api-base", ts.URL + "/v1", "--model", "golden-7b",
		"--api-key-file", keyFile, "-o", filepath.Join(work, "jobs"), "--job-name", "eval", "-n", "2"}, nil, &stdout, &stderr, env)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "2 trials: 2 passed") {
		t.Fatalf("summary:\n%s", stdout.String())
	}
	if len(auth) != 1 || auth["Bearer "+terminusKey] < 6 {
		t.Fatalf("authorization headers seen: %v", auth)
	}
	jobDir := filepath.Join(work, "jobs", "eval")
	var jr struct {
		Stats struct {
			Evals map[string]json.RawMessage `json:"evals"`
		} `json:"stats"`
	}
	readJSONFile(t, filepath.Join(jobDir, "result.json"), &jr)
	if _, ok := jr.Stats.Evals["terminus__golden-7b__tasks"]; !ok {
		t.Fatalf("evals %v", jr.Stats.Evals)
	}
	dirs, _ := filepath.Glob(filepath.Join(jobDir, "task-*"))
	for _, d := range dirs {
		var r struct {
			AgentInfo struct {
				Name      string            `json:"name"`
				ModelInfo map[string]string `json:"model_info"`
			} `json:"agent_info"`
			AgentResult struct {
				In       *int64         `json:"n_input_tokens"`
				Out      *int64         `json:"n_output_tokens"`
				Metadata map[string]any `json:"metadata"`
			} `json:"agent_result"`
			Exc any `json:"exception_info"`
		}
		readJSONFile(t, filepath.Join(d, "result.json"), &r)
		if r.Exc != nil || r.AgentInfo.Name != "terminus" || r.AgentInfo.ModelInfo["name"] != "golden-7b" || r.AgentResult.In == nil || *r.AgentResult.Out == 0 ||
			r.AgentResult.Metadata["end"] != "task_complete" {
			t.Fatalf("%s: %+v", d, r)
		}
		if _, err := os.Stat(filepath.Join(d, "agent", "trajectory.json")); err != nil {
			t.Fatal(err)
		}
	}
	// The key is in no file of the job and in no output.
	filepath.Walk(jobDir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(terminusKey)) {
				t.Errorf("%s holds the API key", p)
			}
		}
		return nil
	})
	if strings.Contains(stdout.String()+stderr.String(), terminusKey) {
		t.Fatal("the API key was printed")
	}
}
