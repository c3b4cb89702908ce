package main

import (
	"bytes"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/berth-sh/berth/internal/apikeys"
	"github.com/berth-sh/berth/internal/testing/hfref"
	"github.com/berth-sh/berth/internal/testing/qwen3test"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/session/engine"
	"github.com/berth-sh/berth/session/testengine"
)

const commandKey = "sk-SECRET-run-command-3c9e"

// commandHarness asks the model what to do with busybox wget and runs the
// reply; it prints its environment first, as careless harnesses do.
const commandHarness = `env | sort > /logs/agent/env.txt
echo "key: $OPENAI_API_KEY"
body=$(printf '{"model":"%s","messages":[{"role":"user","content":"%s"}]}' "$BERTH_MODEL" "$(cat "$BERTH_INSTRUCTION_FILE")")
resp=$(wget -q -O - --header "Authorization: Bearer $OPENAI_API_KEY" --header "Content-Type: application/json" --post-data "$body" "$OPENAI_API_BASE/chat/completions") || exit 9
cmd=$(printf '%s' "$resp" | sed -n 's/.*"content":"\([^"]*\)".*/\1/p')
eval "$cmd"`

// berth run -a command on local (network none): the harness reaches a
// plain OpenAI-compatible endpoint that wants a key through the reverse
// port; the endpoint sees the real key on every request, the sandbox only
// its relay token, and the key is in no file of the job and no output.
func TestRunCommand(t *testing.T) {
	_, state := localState(t)
	work := t.TempDir()
	tasksDir := filepath.Join(work, "tasks")
	for i := range 2 {
		writeSleepTask(t, filepath.Join(tasksDir, fmt.Sprintf("task-%d", i)))
	}
	url, auth := keyedEndpoint(t, func(testengine.Call) testengine.Reply { return testengine.Reply{Text: "printf 42 | tee /tmp/answer"} }, commandKey)
	keyFile := filepath.Join(work, "key")
	os.WriteFile(keyFile, []byte(commandKey+"\n"), 0o600)
	env := registry.MapEnviron(map[string]string{local.EnvStateDir: state, local.EnvAgentBinary: agentFor(t)}, work)

	var stdout, stderr bytes.Buffer
	code := run([]string{"run", "-p", tasksDir, "-a", "command", "--agent-cmd", commandHarness, "--api-base", url + "/v1", "--model", "m-7b",
		"--api-key-file", keyFile, "-o", filepath.Join(work, "jobs"), "--job-name", "eval", "-n", "2"}, nil, &stdout, &stderr, env)
	if code != 0 || !strings.Contains(stdout.String(), "2 trials: 2 passed") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	if seen := auth(); len(seen) != 1 || seen["Bearer "+commandKey] != 2 {
		t.Fatalf("authorization headers the endpoint saw: %v", seen)
	}
	jobDir := filepath.Join(work, "jobs", "eval")
	dirs, _ := filepath.Glob(filepath.Join(jobDir, "task-*"))
	for _, d := range dirs {
		envTxt, _ := os.ReadFile(filepath.Join(d, "agent", "env.txt"))
		if !strings.Contains(string(envTxt), "OPENAI_API_KEY=berth-relay-") || !strings.Contains(string(envTxt), "OPENAI_API_BASE=http://127.0.0.1:39217/v1") ||
			!strings.Contains(string(envTxt), "BERTH_MODEL=m-7b") || !strings.Contains(string(envTxt), "BERTH_INSTRUCTION=Write 42.") {
			t.Fatalf("%s: the harness's environment:\n%s", d, envTxt)
		}
	}
	noKey(t, jobDir, commandKey, stdout.String()+stderr.String())

}

// keyedEndpoint serves the test engine, scripted, in its OpenAI dialect
// behind a check of the key; auth counts the Authorization headers it saw.
func keyedEndpoint(t *testing.T, script testengine.Script, key string) (url string, auth func() map[string]int) {
	t.Helper()
	te, err := testengine.New(qwen3test.Codec(t).Tok, script, testengine.Options{Dialect: engine.OpenAI})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("Authorization")]++
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+key {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		te.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(seen)
	}
}

// noKey fails when key is in a file under dir or in out.
func noKey(t *testing.T, dir, key, out string) {
	t.Helper()
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(key)) {
				t.Errorf("%s holds the API key", p)
			}
		}
		return nil
	})
	if strings.Contains(out, key) {
		t.Fatal("the API key was printed")
	}
}

// berth rollout -a command on local (network none), the session server in
// process on every address (so with a key made up for the run) in front of
// the echoing test engine: the harness's request reaches the session
// through the reverse port, whose relay holds that key; the sample
// carries the reward; no key is printed or written.
func TestRolloutCommand(t *testing.T) {
	_, state := localState(t)
	tok := hfref.RequireQwen3(t)
	work := t.TempDir()
	tasksDir := filepath.Join(work, "tasks")
	writeSleepTask(t, filepath.Join(tasksDir, "echo"))
	// The test engine echoes: "You said: <the command>".
	harness := `body='{"model":"m","messages":[{"role":"user","content":"printf 42 | tee /tmp/answer"}]}'
resp=$(wget -q -O - --header "Authorization: Bearer $OPENAI_API_KEY" --header "Content-Type: application/json" --post-data "$body" "$OPENAI_API_BASE/chat/completions") || exit 9
cmd=$(printf '%s' "$resp" | sed -n 's/.*"content":"You said: \([^"]*\)".*/\1/p')
eval "$cmd"`
	env := registry.MapEnviron(map[string]string{local.EnvStateDir: state, local.EnvAgentBinary: agentFor(t)}, work)
	var stdout, stderr bytes.Buffer
	code := run([]string{"rollout", "-p", tasksDir, "--engine", "test:", "--model-family", "qwen3", "--tokenizer", tok, "--session-addr", "0.0.0.0:0",
		"-a", "command", "--agent-cmd", harness, "-o", filepath.Join(work, "jobs"), "--job-name", "r", "--strict"}, nil, &stdout, &stderr, env)
	if code != 0 || !strings.Contains(stdout.String(), "mean reward 1.000") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	dirs, _ := filepath.Glob(filepath.Join(work, "jobs", "r", "echo__*"))
	if len(dirs) != 1 {
		t.Fatalf("trials %v", dirs)
	}
	b, err := os.ReadFile(filepath.Join(dirs[0], "samples.jsonl"))
	if err != nil || !strings.Contains(string(b), `"status":"COMPLETED"`) || !strings.Contains(string(b), `"reward":1`) {
		t.Fatalf("samples: %v\n%.2000s", err, b)
	}
	noKey(t, filepath.Join(work, "jobs"), apikeys.Prefix, stdout.String()+stderr.String())
}
