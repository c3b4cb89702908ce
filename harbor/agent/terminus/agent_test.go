package terminus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth/harbor/agent"
	"github.com/berth-sh/berth/harbor/task"
	"github.com/berth-sh/berth/internal/testing/fakeprovider"
	"github.com/berth-sh/berth/results"
	"github.com/berth-sh/berth/sandbox"
)

const apiKey = "sk-SECRET-terminus-9e2d"

// model is an OpenAI-compatible endpoint answering from a script; it keeps
// every request's messages.
type model struct {
	mu     sync.Mutex
	script func(n int, msgs []map[string]string) (int, string) // status, body
	reqs   [][]map[string]string
	bodies []map[string]any
}

func (m *model) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	b, _ := io.ReadAll(r.Body)
	json.Unmarshal(b, &body)
	var req struct {
		Messages []map[string]string `json:"messages"`
	}
	json.Unmarshal(b, &req)
	m.mu.Lock()
	m.reqs = append(m.reqs, req.Messages)
	m.bodies = append(m.bodies, body)
	n := len(m.reqs)
	m.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+apiKey {
		http.Error(w, `{"error":{"message":"no key"}}`, http.StatusUnauthorized)
		return
	}
	status, out := m.script(n, req.Messages)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, out)
}

// completion is a chat completion reply carrying content.
func completion(content, finish string, prompt, completionTokens int) string {
	b, _ := json.Marshal(map[string]any{
		"id": "c", "object": "chat.completion", "created": 1, "model": "m",
		"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": content}, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": prompt, "completion_tokens": completionTokens, "total_tokens": prompt + completionTokens},
	})
	return string(b)
}

func answer(cmds []Command, done bool) string {
	b, _ := json.Marshal(map[string]any{"analysis": "looking", "plan": "act", "commands": cmds, "task_complete": done})
	return string(b)
}

type fixture struct {
	sb    *sandbox.Sandbox
	env   agent.Env
	model *model
	url   string
}

func newFixture(t *testing.T, script func(n int, msgs []map[string]string) (int, string)) *fixture {
	t.Helper()
	d, err := fakeprovider.New(fakeprovider.Options{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	p := sandbox.NewProvider("fake", d)
	sb, err := p.Create(t.Context(), sandbox.Spec{Image: "host"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Delete(context.Background()); sb.Close(); p.Close() })
	m := &model{script: script}
	ts := httptest.NewServer(m)
	t.Cleanup(ts.Close)
	return &fixture{sb: sb, model: m, url: ts.URL + "/v1",
		env: agent.Env{Sandbox: sb, Task: &task.Task{Name: "t", Instruction: "Write hello to out.txt."}}}
}

func (f *fixture) agent(t *testing.T, mod func(*Options)) *Agent {
	t.Helper()
	o := Options{APIBase: f.url, APIKey: apiKey, Model: "test-model", Shell: "pipe", RetryDelay: 10 * time.Millisecond}
	if mod != nil {
		mod(&o)
	}
	a, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// checkNoKey fails when the key shows in anything the agent reports.
func checkNoKey(t *testing.T, a *Agent, err error) {
	t.Helper()
	rep := a.Report()
	all := fmt.Sprint(err) + string(rep.Files["trajectory.json"])
	meta, _ := json.Marshal(rep.Metadata)
	if strings.Contains(all+string(meta), apiKey) {
		t.Fatal("the API key is in the agent's report or error")
	}
}

func TestSolvesWithConfirmation(t *testing.T) {
	for _, sh := range []string{"pipe", "tmux"} {
		t.Run(sh, func(t *testing.T) {
			if _, err := exec.LookPath(sh); sh == "tmux" && err != nil {
				t.Skip("tmux not installed (apt-get install tmux)")
			}
			solves(t, sh)
		})
	}
}

func solves(t *testing.T, sh string) {
	f := newFixture(t, func(n int, msgs []map[string]string) (int, string) {
		switch n {
		case 1:
			return 200, completion(answer([]Command{{Keystrokes: "echo hello > out.txt\n", Duration: 5}, {Keystrokes: "cat out.txt\n", Duration: 5}}, false), "stop", 100, 20)
		case 2:
			return 200, completion("Done, I believe.\n"+answer(nil, true), "stop", 150, 10)
		default:
			return 200, completion(answer(nil, true), "stop", 200, 10)
		}
	})
	a := f.agent(t, func(o *Options) { o.Shell = sh })
	err := a.Run(t.Context(), f.env)
	if err != nil {
		t.Fatal(err)
	}
	if a.Report().Metadata["shell"] != sh {
		t.Fatalf("shell %v", a.Report().Metadata["shell"])
	}
	res, _ := f.sb.Run(t.Context(), sandbox.Command{Args: []string{"cat", "out.txt"}})
	if strings.TrimSpace(string(res.Stdout)) != "hello" {
		t.Fatalf("out.txt: %q", res.Stdout)
	}
	if len(f.model.reqs) != 3 {
		t.Fatalf("%d model calls, want 3 (work, complete, confirm)", len(f.model.reqs))
	}
	// The second request shows the first command's output; the third asks
	// for confirmation; roles alternate after the system prompt.
	second := f.model.reqs[1]
	if got := second[len(second)-1]["content"]; !strings.Contains(got, "hello") {
		t.Fatalf("observation after the commands:\n%s", got)
	}
	third := f.model.reqs[2]
	if got := third[len(third)-1]["content"]; !strings.Contains(got, "marked the task complete") || !strings.Contains(got, "text outside the JSON") {
		t.Fatalf("confirmation request:\n%s", got)
	}
	for i, m := range third {
		want := []string{"system", "user", "assistant", "user", "assistant", "user"}[i]
		if m["role"] != want {
			t.Fatalf("message %d is %s, want %s", i, m["role"], want)
		}
	}
	rep := a.Report()
	if *rep.InputTokens != 450 || *rep.OutputTokens != 40 || rep.Metadata["end"] != EndTaskComplete || rep.Metadata["n_turns"] != 3 {
		t.Fatalf("report %+v %+v", rep, rep.Metadata)
	}
	turns := rep.Metadata["turns"].([]TurnMetrics)
	if turns[0].Commands != 2 || turns[0].ToolSeconds <= 0 || turns[0].GenerationSeconds <= 0 || turns[0].Attempts != 1 {
		t.Fatalf("turn metrics %+v", turns[0])
	}
	var traj results.Trajectory // as berth view reads it
	if err := json.Unmarshal(rep.Files["trajectory.json"], &traj); err != nil {
		t.Fatal(err)
	}
	if len(traj.Steps) != 5 || traj.Steps[0].Source != "system" || traj.Steps[2].Source != "agent" ||
		traj.Steps[2].ToolCalls[0].Function != "bash_command" || traj.Steps[2].ToolCalls[0].Command() != "echo hello > out.txt\n" {
		t.Fatalf("trajectory: %s", rep.Files["trajectory.json"])
	}
	// The observation recorded is exactly the next user message.
	if traj.Steps[2].Observations()[0].Content != second[len(second)-1]["content"] {
		t.Fatal("the trajectory's observation differs from what the model got")
	}
	checkNoKey(t, a, err)
}

func TestRetriesServerErrorsAndFeedsBackBadReplies(t *testing.T) {
	f := newFixture(t, func(n int, msgs []map[string]string) (int, string) {
		switch n {
		case 1:
			return 503, `{"object":"error","message":"overloaded"}`
		case 2:
			return 200, completion("I think I should list files.", "stop", 10, 5)
		case 3:
			return 200, completion(answer(nil, true), "stop", 10, 5)
		default:
			return 200, completion(answer(nil, true), "stop", 10, 5)
		}
	})
	a := f.agent(t, nil)
	if err := a.Run(t.Context(), f.env); err != nil {
		t.Fatal(err)
	}
	turns := a.Report().Metadata["turns"].([]TurnMetrics)
	if turns[0].Attempts != 2 || turns[0].ParseError == "" {
		t.Fatalf("turn 1: %+v", turns[0])
	}
	last := f.model.reqs[2]
	if got := last[len(last)-1]["content"]; !strings.Contains(got, "could not be used") {
		t.Fatalf("feedback: %s", got)
	}
}

func TestEndings(t *testing.T) {
	long := strings.Repeat("word ", 50)
	for _, tc := range []struct {
		name   string
		mod    func(*Options)
		script func(n int, msgs []map[string]string) (int, string)
		check  func(error) bool
		end    string
		calls  int
	}{
		{"context refused", nil, func(int, []map[string]string) (int, string) {
			return 400, `{"object":"error","message":"The input (9000 tokens) is longer than the model's context length (8192 tokens).","code":400}`
		}, func(err error) bool { return errors.Is(err, agent.ErrContextLength) }, EndContextLength, 1},
		{"reply cut at the context budget", func(o *Options) { o.ContextTokens = 2000 }, func(int, []map[string]string) (int, string) {
			return 200, completion(long, "length", 1500, 500)
		}, func(err error) bool { return errors.Is(err, agent.ErrContextLength) }, EndContextLength, 1},
		{"reply cut at the output limit is retried", func(o *Options) { o.MaxOutputTokens = 50; o.MaxTurns = 3 }, func(int, []map[string]string) (int, string) {
			return 200, completion(long, "length", 100, 50)
		}, func(err error) bool { return err == nil }, EndTurnLimit, 3},
		{"turn limit", func(o *Options) { o.MaxTurns = 2 }, func(int, []map[string]string) (int, string) {
			return 200, completion(answer([]Command{{Keystrokes: "true\n", Duration: 1}}, false), "stop", 10, 5)
		}, func(err error) bool { return err == nil }, EndTurnLimit, 2},
		{"endpoint keeps failing", func(o *Options) { o.MaxRetries = 2 }, func(int, []map[string]string) (int, string) {
			return 502, `bad gateway`
		}, func(err error) bool {
			return isA[*agent.ModelError](err) && sandbox.ClassOf(err) == sandbox.Unavailable
		}, EndModelError, 3},
		{"wrong key", func(o *Options) { o.APIKey = "sk-wrong" }, nil,
			func(err error) bool {
				return isA[*agent.ModelError](err) && sandbox.ClassOf(err) == sandbox.Unauthenticated
			}, EndModelError, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.script)
			a := f.agent(t, tc.mod)
			err := a.Run(t.Context(), f.env)
			if !tc.check(err) {
				t.Fatalf("run: %v", err)
			}
			rep := a.Report()
			if rep.Metadata["end"] != tc.end || len(f.model.reqs) != tc.calls {
				t.Fatalf("end %v after %d calls; want %s after %d", rep.Metadata["end"], len(f.model.reqs), tc.end, tc.calls)
			}
			checkNoKey(t, a, err)
		})
	}
}

func TestContextBudgetSetsMaxTokens(t *testing.T) {
	f := newFixture(t, func(n int, msgs []map[string]string) (int, string) {
		if n == 1 {
			return 200, completion(answer([]Command{{Keystrokes: "true\n", Duration: 1}}, false), "stop", 900, 50)
		}
		return 200, completion(answer(nil, true), "stop", 1000, 10)
	})
	a := f.agent(t, func(o *Options) { o.ContextTokens = 4000; o.MaxOutputTokens = 2000; o.MaxTurns = 2 })
	if err := a.Run(t.Context(), f.env); err != nil {
		t.Fatal(err)
	}
	first, second := f.model.bodies[0]["max_tokens"].(float64), f.model.bodies[1]["max_tokens"].(float64)
	if first != 2000 || second >= 4000-950 || second <= 0 {
		t.Fatalf("max_tokens %v then %v", first, second)
	}
}

func TestSandboxDeletedMidRun(t *testing.T) {
	var f *fixture
	f = newFixture(t, func(n int, msgs []map[string]string) (int, string) {
		if n == 2 {
			f.sb.Delete(context.Background())
		}
		return 200, completion(answer([]Command{{Keystrokes: "echo hi\n", Duration: 2}}, false), "stop", 10, 5)
	})
	a := f.agent(t, func(o *Options) { o.MaxTurns = 5 })
	err := a.Run(t.Context(), f.env)
	if !isA[*agent.SandboxError](err) {
		t.Fatalf("run after the sandbox was deleted: %v", err)
	}
	if a.Report().Metadata["end"] != EndSandboxError {
		t.Fatalf("end %v", a.Report().Metadata["end"])
	}
}

func TestCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	f := newFixture(t, func(n int, msgs []map[string]string) (int, string) {
		time.AfterFunc(300*time.Millisecond, cancel) // while the command runs
		return 200, completion(answer([]Command{{Keystrokes: "sleep 30\n", Duration: 30}}, false), "stop", 10, 5)
	})
	a := f.agent(t, nil)
	start := time.Now()
	err := a.Run(ctx, f.env)
	if !errors.Is(err, context.Canceled) || time.Since(start) > 20*time.Second {
		t.Fatalf("run: %v after %v", err, time.Since(start))
	}
}

func TestReportWritesNothingOutsideAgentDir(t *testing.T) {
	// The report's file names are what the trial writes under agent/.
	a, err := New(Options{APIBase: "http://127.0.0.1:1/v1"})
	if err != nil {
		t.Fatal(err)
	}
	for name := range a.Report().Files {
		if !filepath.IsLocal(name) || strings.Contains(name, string(os.PathSeparator)) {
			t.Fatalf("file %q", name)
		}
	}
}
