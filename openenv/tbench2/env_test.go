package tbench2_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/testing/testbin"
	"github.com/berth-sh/berth/openenv"
	"github.com/berth-sh/berth/openenv/tbench2"
	"github.com/berth-sh/berth/sandbox"
)

func TestMain(m *testing.M) { testbin.Main(m) }

// One episode through every action type, ending in a verdict and the
// sandbox's deletion.
func TestEveryAction(t *testing.T) {
	e := newEnv(t, nil)
	c := e.client()
	obs := reset(t, c, taskAnswer)
	if obs.Instruction != "Write 42 to /tmp/answer.\n" || obs.TaskID != taskAnswer || obs.ActionType != "reset" || !obs.Success || obs.SessionID != nil {
		t.Fatalf("reset: %+v", obs)
	}
	id, _ := obs.Info["sandbox_id"].(string)
	if id == "" || e.live() != 1 {
		t.Fatalf("reset made no sandbox: %+v", obs.Info)
	}

	// The tests and the solution are not in the sandbox before evaluate.
	o, r := step(t, c, tbench2.Exec("ls /tests /solution 2>&1; echo out; echo err >&2; exit 3"))
	if !o.Success || !strings.Contains(o.Output, "out\n") || !strings.Contains(o.Output, "err\n") || strings.Contains(o.Output, "test.sh") ||
		num(o.Info["exit_code"]) != 3 || r.Reward != nil || r.Done || *o.SessionID != tbench2.DefaultSession || o.ActionType != "exec" {
		t.Fatalf("exec: %+v reward=%v done=%v", o, r.Reward, r.Done)
	}

	// write_file: a relative path lands in the working directory.
	o, _ = step(t, c, tbench2.Action{ActionType: tbench2.ActionWriteFile, FilePath: "/tmp/note.txt", Content: "hello\n"})
	if !o.Success || o.Output != "Wrote content to /tmp/note.txt" {
		t.Fatalf("write_file: %+v", o)
	}
	if o, _ = step(t, c, tbench2.Exec("cat /tmp/note.txt")); o.Output != "hello\n" {
		t.Fatalf("cat after write_file: %q", o.Output)
	}
	if o, _ = step(t, c, tbench2.Action{ActionType: tbench2.ActionWriteFile, FilePath: "rel/note.txt", Content: "here"}); !o.Success {
		t.Fatalf("write_file to a relative path: %+v", o)
	}
	if o, _ = step(t, c, tbench2.Exec("cat rel/note.txt")); o.Output != "here" {
		t.Fatalf("a relative write_file is not where commands run: %q", o.Output)
	}

	// A background session: started, fed through its stdin, waited on,
	// viewed, killed.
	s := str("reader")
	o, _ = step(t, c, tbench2.Action{ActionType: tbench2.ActionExec, Command: "read line; echo got $line; sleep 300", SessionID: s, Block: false})
	if !o.Success || !strings.Contains(o.Output, "Started session reader") {
		t.Fatalf("exec block=false: %+v", o)
	}
	if o, _ = step(t, c, tbench2.Action{ActionType: tbench2.ActionWrite, SessionID: s, Command: "hello"}); !o.Success {
		t.Fatalf("write: %+v", o)
	}
	wait := 0.3
	var got strings.Builder
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(got.String(), "got hello") && time.Now().Before(deadline); {
		o, _ = step(t, c, tbench2.Action{ActionType: tbench2.ActionWait, SessionID: s, WaitSeconds: &wait})
		got.WriteString(o.Output)
	}
	if got.String() != "got hello\n" || o.Info["running"] != true {
		t.Fatalf("wait: %q %+v", got.String(), o.Info)
	}
	if o, _ = step(t, c, tbench2.Action{ActionType: tbench2.ActionView, SessionID: s}); o.Output != "" || !o.Success {
		t.Fatalf("view after wait returned it all: %+v", o)
	}
	if o, _ = step(t, c, tbench2.Action{ActionType: tbench2.ActionKill, SessionID: s}); !o.Success || o.Output != "Killed session reader" {
		t.Fatalf("kill: %+v", o)
	}
	if o, _ = step(t, c, tbench2.Action{ActionType: tbench2.ActionView, SessionID: s}); o.Success || !strings.Contains(o.Error, "no session reader") {
		t.Fatalf("view after kill: %+v", o)
	}
	// A session that exits by itself reports its code.
	o, _ = step(t, c, tbench2.Action{ActionType: tbench2.ActionExec, Command: "echo done; exit 7", SessionID: str("quick"), Block: false})
	o, _ = step(t, c, tbench2.Action{ActionType: tbench2.ActionWait, SessionID: str("quick")})
	if o.Output != "done\n" || o.Info["running"] != false || num(o.Info["exit_code"]) != 7 {
		t.Fatalf("wait on a quick session: %+v", o)
	}

	// Actions on sessions need their id; unknown types fail as OpenEnv's.
	for _, a := range []tbench2.Action{{ActionType: "write"}, {ActionType: "view"}, {ActionType: "wait"}, {ActionType: "kill"}} {
		if o, _ := step(t, c, a); o.Success || o.Error != "session_id is required for action_type='"+a.ActionType+"'" {
			t.Errorf("%s without a session: %+v", a.ActionType, o)
		}
	}
	if o, _ := step(t, c, tbench2.Action{ActionType: "dance"}); o.Success || o.Error != "Unsupported action_type: dance" {
		t.Errorf("unknown action: %+v", o)
	}

	// Solve, then evaluate: reward 1 with the harness mark.
	step(t, c, tbench2.Exec("echo 42 > /tmp/answer"))
	o, r = step(t, c, tbench2.Action{ActionType: tbench2.ActionEvaluate})
	if !o.Success || o.Error != "" || r.Reward == nil || *r.Reward != 1 || !r.Done || o.Info["harness"] != tbench2.Harness || o.Info["tests_passed"] != true {
		t.Fatalf("evaluate: %+v reward=%v done=%v", o, r.Reward, r.Done)
	}
	var st tbench2.State
	if err := c.State(t.Context(), &st); err != nil {
		t.Fatal(err)
	}
	if st.TaskID != taskAnswer || st.LastActionType != "evaluate" || st.StepCount < 15 || !st.TerminalReady || st.EpisodeID == nil {
		t.Fatalf("state: %+v", st)
	}
	// close deletes the sandbox; the session stays, without an episode.
	o, r = step(t, c, tbench2.Action{ActionType: tbench2.ActionClose})
	if !r.Done || o.Output != "Closed TB2 environment." || e.live() != 0 {
		t.Fatalf("close: %+v, %d live", o, e.live())
	}
	if _, err := e.prov.Connect(t.Context(), id); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("sandbox %s after close: %v", id, err)
	}
	_, err := c.Step(t.Context(), tbench2.Exec("true"))
	var se *openenv.ServerError
	if !errors.As(err, &se) || se.Code != openenv.ExecutionError || se.Message != "TB2 environment not initialized. Call reset() first." {
		t.Fatalf("step after close: %v", err)
	}
}

// No reward file is no verdict: reward null, error set, no harness mark.
func TestEvaluateWithoutVerdict(t *testing.T) {
	e := newEnv(t, nil)
	c := e.client()
	reset(t, c, taskNoReward)
	o, r := step(t, c, tbench2.Action{ActionType: tbench2.ActionEvaluate})
	if r.Reward != nil || !r.Done || o.Success || !strings.Contains(o.Error, "RewardFileNotFoundError") || o.Info["harness"] != nil ||
		!strings.Contains(o.Output, "forgot to write a reward") {
		t.Fatalf("evaluate without a reward: %+v reward=%v", o, r.Reward)
	}
	// The answer with reward 0 is a verdict.
	reset(t, c, taskAnswer)
	o, r = step(t, c, tbench2.Action{ActionType: tbench2.ActionEvaluate})
	if r.Reward == nil || *r.Reward != 0 || o.Info["harness"] != tbench2.Harness || o.Info["tests_passed"] != false || o.Error != "" {
		t.Fatalf("evaluate of an unsolved task: %+v reward=%v", o, r.Reward)
	}
}

func TestCommandTimeout(t *testing.T) {
	e := newEnv(t, func(o *tbench2.Options, _ *openenv.Options) { o.CommandTimeout = time.Second })
	c := e.client()
	reset(t, c, taskAnswer)
	start := time.Now()
	o, _ := step(t, c, tbench2.Exec("echo before; sleep 30"))
	if o.Success || !strings.Contains(o.Error, "timed out after 1s") || o.Output != "before\n" || o.Info["timed_out"] != true {
		t.Fatalf("timed out exec: %+v", o)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("the command ran %v past a 1s timeout", d)
	}
	if o, _ := step(t, c, tbench2.Exec("echo alive")); o.Output != "alive\n" {
		t.Fatalf("after a timeout: %+v", o)
	}
}

// A client names tasks; it cannot name anything outside the tasks
// directory, by id, path or symlink.
func TestTaskConfinement(t *testing.T) {
	e := newEnv(t, nil)
	outside := t.TempDir()
	os.MkdirAll(filepath.Join(outside, "evil", "tests"), 0o755)
	os.WriteFile(filepath.Join(outside, "evil", "task.toml"), []byte("[environment]\ndocker_image = \"host\"\n"), 0o644)
	os.WriteFile(filepath.Join(outside, "evil", "tests", "test.sh"), []byte("#!/bin/sh\n"), 0o755)
	if err := os.Symlink(filepath.Join(outside, "evil"), filepath.Join(e.tasks, "link")); err != nil {
		t.Fatal(err)
	}
	c := e.client()
	for _, args := range []map[string]any{
		{"task_id": "../" + filepath.Base(outside) + "/evil"},
		{"task_id": ".."},
		{"task_id": "link"},
		{"task_path": filepath.Join(outside, "evil")},
		{"task_path": "../" + filepath.Base(outside) + "/evil"},
		{"task_path": "/etc"},
		{"task_id": "missing"},
		{"task_id": 7},
		{},
	} {
		_, err := c.Reset(t.Context(), args)
		var se *openenv.ServerError
		if !errors.As(err, &se) || se.Code != openenv.ExecutionError {
			t.Errorf("reset %v: %v", args, err)
		} else if strings.Contains(se.Message, e.tasks) || (args["task_id"] == "link" && strings.Contains(se.Message, outside)) {
			t.Errorf("reset %v: the answer names a host path of the server: %s", args, se.Message)
		}
	}
	if e.live() != 0 {
		t.Fatalf("a refused reset made a sandbox")
	}
	// A task path inside the directory is fine, relative or absolute.
	for _, p := range []string{taskAnswer, filepath.Join(abs(t, e.tasks), taskAnswer)} {
		r, err := c.Reset(t.Context(), map[string]any{"task_path": p})
		if err != nil {
			t.Fatalf("task_path %s: %v", p, err)
		}
		var o tbench2.Observation
		r.Decode(&o)
		if o.TaskID != taskAnswer || o.TaskPath != taskAnswer {
			t.Errorf("task_path %s: %+v", p, o)
		}
	}
	if e.live() != 1 {
		t.Errorf("a second reset left the first sandbox: %d live", e.live())
	}
}

// A client that disconnects in the middle of a command leaves no sandbox.
func TestDisconnectMidEpisode(t *testing.T) {
	e := newEnv(t, nil)
	c := e.client()
	reset(t, c, taskAnswer)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := c.Step(ctx, tbench2.Exec("sleep 300"))
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	cancel() // the client drops the connection
	<-done
	deadline := time.Now().Add(20 * time.Second)
	for e.live() != 0 || e.srv.Active() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d sandboxes, %d sessions a while after the client left", e.live(), e.srv.Active())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The golden path through exec alone: the solution pushed in base64
// chunks and run, then evaluate.
func TestPushAndSolve(t *testing.T) {
	e := newEnv(t, nil)
	c := e.client()
	reset(t, c, taskAnswer)
	sol := t.TempDir()
	big := strings.Repeat("0123456789abcdef", 16<<10)
	os.WriteFile(filepath.Join(sol, "solve.sh"), []byte(harbortestSolve), 0o755)
	os.WriteFile(filepath.Join(sol, "padding.txt"), []byte(big), 0o644)
	os.WriteFile(filepath.Join(sol, "random.bin"), randomBytes(200<<10), 0o644)
	cmds, err := tbench2.PushCommands(t.Context(), sol, "/solution")
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) < 5 {
		t.Fatalf("%d push commands for 200 KiB of random bytes", len(cmds))
	}
	for _, cmd := range cmds {
		if o, _ := step(t, c, tbench2.Exec(cmd)); !o.Success || num(o.Info["exit_code"]) != 0 {
			t.Fatalf("%.60s: %+v", cmd, o)
		}
	}
	run, err := tbench2.SolveCommand("/solution/solve.sh", "/logs/agent/oracle.txt", map[string]string{"WHO": "it's me"})
	if err != nil {
		t.Fatal(err)
	}
	o, _ := step(t, c, tbench2.Exec(run))
	if !strings.HasSuffix(o.Output, "SOLVE_EXIT=0\n") {
		t.Fatalf("solve: %+v", o)
	}
	if o, _ = step(t, c, tbench2.Exec("cat /logs/agent/oracle.txt; cmp /solution/random.bin /solution/random.bin && wc -c < /solution/padding.txt")); !strings.Contains(o.Output, "it's me noninteractive") ||
		!strings.Contains(o.Output, "262144") {
		t.Fatalf("after solve: %q", o.Output)
	}
	_, r := step(t, c, tbench2.Action{ActionType: tbench2.ActionEvaluate})
	if r.Reward == nil || *r.Reward != 1 {
		t.Fatalf("evaluate after the golden push: %v", r.Reward)
	}
}

const harbortestSolve = "#!/bin/sh\necho \"$WHO $DEBIAN_FRONTEND\"\necho 42 > /tmp/answer\n"

func randomBytes(n int) []byte {
	b := make([]byte, n)
	var x uint64 = 88172645463325252
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
}

// The stateless HTTP routes: reset makes and deletes a sandbox, step has no
// episode to act on, and the schema is Tbench2Action's as pydantic writes it.
func TestHTTPRoutes(t *testing.T) {
	e := newEnv(t, nil)
	post := func(path, body string) (int, string) {
		resp, err := http.Post(e.url+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := post("/reset", `{"task_id": "answer", "seed": 3}`)
	if code != 200 || !strings.Contains(body, `"instruction":"Write 42 to /tmp/answer.\n"`) || !strings.Contains(body, `"reward":0.0,"done":false}`) {
		t.Fatalf("POST /reset: %d %s", code, body)
	}
	if e.live() != 0 {
		t.Errorf("the stateless reset left its sandbox")
	}
	if code, body = post("/step", `{"action": {"action_type": "exec", "command": "true"}}`); code != 500 || body != `{"detail":"TB2 environment not initialized. Call reset() first."}` {
		t.Errorf("POST /step: %d %s", code, body)
	}
	if code, body = post("/step", `{"action": {"action_type": 1}}`); code != 422 || body != `{"detail":[{"type":"string_type","loc":["action_type"],"msg":"Input should be a valid string","input":1}]}` {
		t.Errorf("POST /step with a bad action: %d %s", code, body)
	}
	resp, err := http.Get(e.url + "/schema")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var schema struct {
		Action struct {
			Title                string                    `json:"title"`
			AdditionalProperties bool                      `json:"additionalProperties"`
			Properties           map[string]map[string]any `json:"properties"`
		} `json:"action"`
		Observation map[string]any `json:"observation"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&schema); err != nil {
		t.Fatal(err)
	}
	a := schema.Action
	if a.Title != "Tbench2Action" || a.AdditionalProperties || a.Properties["action_type"]["default"] != "exec" || a.Properties["block"]["default"] != true ||
		a.Properties["session_id"]["anyOf"] == nil || a.Properties["action_type"]["title"] != "Action Type" || len(a.Properties) != 8 {
		t.Errorf("action schema: %+v", a)
	}
	if schema.Observation["title"] != "Tbench2Observation" {
		t.Errorf("observation schema: %v", schema.Observation)
	}
}
