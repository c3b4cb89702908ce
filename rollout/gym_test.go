package rollout_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/results/layout"
	"github.com/berth-sh/berth/rollout"
	"github.com/berth-sh/berth/rollout/policy"
	"github.com/berth-sh/berth/rollout/rollouttest"
	"github.com/berth-sh/berth/session/testengine"
)

// fakeGym follows the /run contract of Gym's mini_swe_agent_2 agent
// server without sandboxes: it asks the policy once at
// {policy_base_url}/chat/completions (Bearer key) with the instance's
// problem statement, rewards an answer holding the instance's "want", and
// answers 200 with reward, metadata and the trajectory. A fault, chosen
// per instance and call, replaces the answer.
type fakeGym struct {
	t      *testing.T
	faults map[string]func(call int) string // instance_id -> what call n does ("" answers)
	big    []byte                           // the "big" fault's padding

	mu     sync.Mutex
	bodies []map[string]json.RawMessage
	calls  map[string]int
	hung   int // runs waiting in "hang"
}

func newFakeGym(t *testing.T, faults map[string]func(int) string) (*fakeGym, string) {
	g := &fakeGym{t: t, faults: faults, calls: map[string]int{}}
	ts := httptest.NewServer(g)
	t.Cleanup(ts.Close)
	return g, ts.URL
}

func (g *fakeGym) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/run" {
		http.NotFound(w, r)
		return
	}
	var body map[string]json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		return
	}
	var in struct {
		ID      string `json:"instance_id"`
		Problem string `json:"problem_statement"`
		Want    string `json:"want"`
		URL     string `json:"policy_base_url"`
		Key     string `json:"policy_api_key"`
	}
	raw, _ := json.Marshal(body)
	json.Unmarshal(raw, &in)
	g.mu.Lock()
	g.bodies = append(g.bodies, body)
	g.calls[in.ID]++
	n := g.calls[in.ID]
	g.mu.Unlock()
	fault := ""
	if f := g.faults[in.ID]; f != nil {
		fault = f(n)
	}
	switch fault {
	case "500":
		http.Error(w, "Internal Server Error", http.StatusInternalServerError)
		return
	case "422":
		http.Error(w, `{"detail":"instance_id: field required"}`, http.StatusUnprocessableEntity)
		return
	case "echo": // a 422 that repeats the request, as FastAPI's can
		w.WriteHeader(http.StatusUnprocessableEntity)
		w.Write(raw)
		return
	case "drop": // the connection breaks before an answer
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
		return
	}
	msgs := []rollouttest.Message{{Role: "system", Content: "Reply with one bash block."}, {Role: "user", Content: in.Problem}}
	answer, err := g.chat(r.Context(), in.URL, in.Key, msgs)
	if fault == "hang" { // asked the policy, then never answers
		g.mu.Lock()
		g.hung++
		g.mu.Unlock()
		<-r.Context().Done()
		return
	}
	out := map[string]any{"instance_id": in.ID, "reward": 0.0, "response": map[string]any{"output": []any{}}}
	switch {
	case err != nil:
		out["metadata"] = map[string]any{"error": err.Error(), "traceback": "Traceback (most recent call last): ..."}
	case fault == "gym-error":
		out["metadata"] = map[string]any{"error": "sandbox create failed: 503", "traceback": "..."}
	default:
		msgs = append(msgs, rollouttest.Message{Role: "assistant", Content: answer})
		resolved := strings.Contains(answer, in.Want)
		if resolved {
			out["reward"] = 1.0
		}
		out["metadata"] = map[string]any{"resolved": resolved, "instance_id": in.ID}
		out["responses_create_params"] = map[string]any{"input": msgs}
	}
	if fault == "big" {
		out["response"] = map[string]any{"output": string(g.big)}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

func (g *fakeGym) chat(ctx context.Context, base, key string, msgs []rollouttest.Message) (string, error) {
	b, _ := json.Marshal(map[string]any{"model": "policy", "messages": msgs})
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/chat/completions", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if key == "" {
		key = "dummy_key"
	}
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	rb, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		return "", errors.New(res.Status + ": " + string(rb))
	}
	var reply struct {
		Choices []struct {
			Message rollouttest.Message `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(rb, &reply); err != nil || len(reply.Choices) == 0 {
		return "", errors.New("no choices")
	}
	return reply.Choices[0].Message.Content, nil
}

func (g *fakeGym) callsOf(id string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls[id]
}

// gymTasks writes a tasks file with n instances, inst-0 .. inst-(n-1),
// each solved by "echo <i>42".
func gymTasks(t *testing.T, n int) (string, []policy.GymInstance) {
	var b strings.Builder
	var ins []policy.GymInstance
	for i := range n {
		id := "inst-" + string(rune('0'+i))
		ps := "Print " + id + " answer."
		sol := "echo " + string(rune('0'+i)) + "42"
		line, _ := json.Marshal(map[string]any{"instance_id": id, "problem_statement": ps, "want": sol})
		b.Write(line)
		b.WriteString("\n")
		ins = append(ins, policy.GymInstance{ProblemStatement: ps, Solution: sol})
	}
	p := filepath.Join(t.TempDir(), "tasks.jsonl")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p, ins
}

// gymRun runs a Gym rollout of tasks with the golden policy.
func gymRun(ctx context.Context, t *testing.T, pe *rollouttest.PolicyEngine, gymURL, tasks string, mod func(*rollout.GymConfig)) (*rollout.Result, string, error) {
	t.Helper()
	jobs := t.TempDir()
	cfg := rollout.GymConfig{URL: gymURL, TasksPath: tasks, JobName: "g", JobsDir: jobs, SamplesPerTask: 1, NConcurrent: 4,
		BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond, Strict: true}
	if mod != nil {
		mod(&cfg)
	}
	res, err := rollout.RunGym(ctx, cfg, rollout.GymOptions{Sessions: pe.Client, TokenText: pe.TokenText})
	if res != nil && res.Rollout != nil {
		var b strings.Builder
		res.Rollout.Print(&b)
		t.Logf("\n%s", b.String())
	}
	return res, filepath.Join(jobs, "g"), err
}

// byTask reads each sample directory of a Gym job: its result and samples.
func byTask(t *testing.T, jobDir string) map[string][]gymSampleDir {
	out := map[string][]gymSampleDir{}
	for _, d := range rollouttest.TrialDirs(t, jobDir) {
		r := rollouttest.TrialResult(t, d)
		out[r.TaskName] = append(out[r.TaskName], gymSampleDir{dir: d, r: r, s: rollouttest.ReadSamples(t, d)})
	}
	return out
}

type gymSampleDir struct {
	dir string
	r   *trial.Result
	s   []rollouttest.Sample
}

// A Gym whose instances fail in every way a sample can: a 500 once and a
// dropped connection once are retried with a fresh session (reward 1, two
// calls); a 500 every time stops after 3 attempts; a 422 is not retried; an
// answer over the bound is not read past it. The failed samples are
// ABORTED with the reason, the others complete, and no session is left.
func TestGymRetries(t *testing.T) {
	tasks, ins := gymTasks(t, 6)
	pe := rollouttest.NewPolicyEngine(t, policy.GymGolden(ins))
	g, gymURL := newFakeGym(t, map[string]func(int) string{
		"inst-1": func(n int) string { return map[int]string{1: "500"}[n] },
		"inst-2": func(n int) string { return map[int]string{1: "drop"}[n] },
		"inst-3": func(int) string { return "500" },
		"inst-4": func(int) string { return "422" },
		"inst-5": func(int) string { return "big" },
	})
	g.big = bytes.Repeat([]byte("x"), 2<<20)
	res, dir, err := gymRun(t.Context(), t, pe, gymURL, tasks, func(c *rollout.GymConfig) { c.MaxReplyBytes = 1 << 20 })
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		calls  int
		reward float64
		abort  string
	}{
		"inst-0": {1, 1, ""}, "inst-1": {2, 1, ""}, "inst-2": {2, 1, ""},
		"inst-3": {3, 0, "NeMoGymError: NeMo Gym /run: 500: Internal Server Error"},
		"inst-4": {1, 0, "NeMoGymError: NeMo Gym /run: 422:"},
		"inst-5": {1, 0, "the answer is over 1048576 bytes"},
	}
	got := byTask(t, dir)
	for id, w := range want {
		if n := g.callsOf(id); n != w.calls {
			t.Errorf("%s: %d calls of /run, want %d", id, n, w.calls)
		}
		sd := got[id]
		if len(sd) != 1 || len(sd[0].s) != 1 {
			t.Fatalf("%s: %d sample dirs", id, len(sd))
		}
		s, r := sd[0].s[0], sd[0].r
		if s.Reward == nil || *s.Reward != w.reward || r.Reward() != w.reward {
			t.Errorf("%s: reward %v / %v, want %v", id, s.Reward, r.Reward(), w.reward)
		}
		if w.abort == "" {
			if s.Status != "COMPLETED" || s.Metadata.ExitStatus != rollout.Submitted || r.ExceptionInfo != nil || s.Metadata.EvalReport["resolved"] != true {
				t.Errorf("%s: %s %s %+v %v", id, s.Status, s.Metadata.ExitStatus, r.ExceptionInfo, s.Metadata.EvalReport)
			}
			pe.CheckMask(t, sd[0].dir, s)
			if s.Metadata.AgentMetrics["gym_attempts"] != float64(w.calls) {
				t.Errorf("%s: agent metrics %v", id, s.Metadata.AgentMetrics)
			}
			continue
		}
		if s.Status != "ABORTED" || !strings.Contains(s.Metadata.AbortReason, w.abort) || r.ExceptionInfo == nil || r.ExceptionInfo.ExceptionType != string(rollout.GymError) {
			t.Errorf("%s: status %s, abort reason %q, exception %+v", id, s.Status, s.Metadata.AbortReason, r.ExceptionInfo)
		}
		if len(s.Metadata.AbortReason) > 2048 {
			t.Errorf("%s: an abort reason of %d bytes", id, len(s.Metadata.AbortReason))
		}
	}
	if res.Rollout.Samples != 6 || res.Rollout.Statuses["ABORTED"] != 3 || len(res.Rollout.Aborted) != 3 || res.Summary.Retries != 4 {
		t.Fatalf("rollout %+v, summary %+v", res.Rollout, res.Summary)
	}
	if n := pe.LiveSessions(); n != 0 {
		t.Fatalf("%d sessions left open", n)
	}
	var jr layout.JobResult
	rollouttest.ReadJSON(t, filepath.Join(dir, "result.json"), &jr)
	if jr.NTotalTrials != 6 || jr.FinishedAt.IsZero() || jr.Stats.NCompleted != 3 || jr.Stats.NErrored != 3 || jr.Stats.NRetries != 4 {
		t.Fatalf("job result.json %+v", jr)
	}
}

// A Gym that never answers one instance: that sample hits the per-sample
// limit and is ABORTED with the reason, keeping the turn its session
// recorded; the others finish with reward 1 meanwhile.
func TestGymSampleTimeout(t *testing.T) {
	tasks, ins := gymTasks(t, 3)
	pe := rollouttest.NewPolicyEngine(t, policy.GymGolden(ins))
	_, gymURL := newFakeGym(t, map[string]func(int) string{"inst-1": func(int) string { return "hang" }})
	start := time.Now()
	res, dir, err := gymRun(t.Context(), t, pe, gymURL, tasks, func(c *rollout.GymConfig) { c.SampleTimeout = 2 * time.Second })
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("the rollout took %v with a 2 s sample limit", d)
	}
	got := byTask(t, dir)
	for _, id := range []string{"inst-0", "inst-2"} {
		if s := got[id][0].s[0]; s.Status != "COMPLETED" || *s.Reward != 1 {
			t.Fatalf("%s: %s reward %v", id, s.Status, *s.Reward)
		}
	}
	hung := got["inst-1"][0]
	s := hung.s[0]
	if s.Status != "ABORTED" || !strings.Contains(s.Metadata.AbortReason, "AgentTimeoutError: NeMo Gym /run gave no answer within 2s") ||
		s.Metadata.ExitStatus != rollout.TimeLimitExceeded || hung.r.ExitStatus() != layout.ExitTimeLimitExceeded {
		t.Fatalf("the hung sample: %s %q %s", s.Status, s.Metadata.AbortReason, s.Metadata.ExitStatus)
	}
	// The turn before the hang is in the sample.
	if len(s.LossMask) == 0 || !strings.Contains(strings.Join(s.TokenTexts, ""), "echo 142") {
		t.Fatalf("the hung sample lost its turn: %d mask", len(s.LossMask))
	}
	pe.CheckMask(t, hung.dir, s)
	if len(res.Rollout.Aborted) != 1 || res.Rollout.Aborted[0].Trial != filepath.Base(hung.dir) {
		t.Fatalf("rollout.json aborted: %+v", res.Rollout.Aborted)
	}
	if n := pe.LiveSessions(); n != 0 {
		t.Fatalf("%d sessions left open", n)
	}
}

// Cancelling the rollout (Ctrl-C) while every /run waits on Gym: the run
// ends with context.Canceled, the running samples are ABORTED as
// cancelled, the ones never started are counted cancelled, and no session
// is left open.
func TestGymCancel(t *testing.T) {
	tasks, ins := gymTasks(t, 4)
	pe := rollouttest.NewPolicyEngine(t, policy.GymGolden(ins))
	hang := func(int) string { return "hang" }
	g, gymURL := newFakeGym(t, map[string]func(int) string{"inst-0": hang, "inst-1": hang, "inst-2": hang, "inst-3": hang})
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		for {
			g.mu.Lock()
			n := g.hung
			g.mu.Unlock()
			if n == 2 {
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	res, dir, err := gymRun(ctx, t, pe, gymURL, tasks, func(c *rollout.GymConfig) { c.NConcurrent = 2; c.SamplesPerTask = 2 })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if n := pe.LiveSessions(); n != 0 {
		t.Fatalf("%d sessions left open", n)
	}
	dirs := rollouttest.TrialDirs(t, dir)
	if len(dirs) != 2 || res.Job.Stats.NCancelled != 8 || res.Summary.Cancelled != 8 {
		t.Fatalf("%d sample dirs, %d cancelled", len(dirs), res.Job.Stats.NCancelled)
	}
	for _, d := range dirs {
		s := rollouttest.ReadSamples(t, d)[0]
		if s.Status != "ABORTED" || !strings.HasPrefix(s.Metadata.AbortReason, "CancelledError: ") || len(s.LossMask) == 0 {
			t.Fatalf("%s: %s %q", d, s.Status, s.Metadata.AbortReason)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, rollout.SummaryFile)); err != nil {
		t.Fatal(err)
	}
}

// What /run is sent: the task line's fields as they are (unknown ones
// too), responses_create_params with the task's own input and the
// rollout's sampling settings, the session as the Gym host reaches it
// (the external URL) and the session server's key; a policy_base_url or
// policy_api_key in the task file is replaced. A line in Miles's format
// sends its metadata. A Gym that reports an error in metadata gives reward
// 0, AgentError, and keeps the samples. A Gym that repeats the request in
// an error puts no key into the results.
func TestGymRunBody(t *testing.T) {
	const key = "berth_gymbody0123456789abcdef"
	script := func(c testengine.Call) testengine.Reply {
		return testengine.Reply{Text: policy.BashAnswer("go", "echo 042")}
	}
	pe := rollouttest.NewKeyedPolicyEngine(t, script, key)
	g, gymURL := newFakeGym(t, map[string]func(int) string{"err-1": func(int) string { return "gym-error" }, "echo-2": func(int) string { return "echo" }})
	lines := []string{
		`{"instance_id":"inst-0","problem_statement":"p0","want":"echo 042","repo":"django/django","FAIL_TO_PASS":["a"],"extra":{"k":1},` +
			`"responses_create_params":{"input":[{"role":"user","content":"hi"}],"temperature":0.2,"metadata":{"x":"y"}},` +
			`"policy_base_url":"http://evil.example/v1","policy_api_key":"stolen"}`,
		``,
		`{"prompt":"p1","metadata":{"instance_id":"err-1","problem_statement":"p1","subset":"gym","split":"train"}}`,
		`{"instance_id":"echo-2","problem_statement":"p2"}`,
	}
	tasks := filepath.Join(t.TempDir(), "tasks.jsonl")
	os.WriteFile(tasks, []byte(strings.Join(lines, "\n")), 0o644)
	temp, topP, maxOut := 0.7, 0.95, 512
	external := strings.Replace(pe.Client.BaseURL, "127.0.0.1", "localhost", 1)
	jobs := t.TempDir()
	res, err := rollout.RunGym(t.Context(), rollout.GymConfig{URL: gymURL + "/", TasksPath: tasks, JobName: "b", JobsDir: jobs,
		Sampling: rollout.Sampling{Temperature: &temp, TopP: &topP, MaxOutputTokens: &maxOut}},
		rollout.GymOptions{Sessions: pe.Client, PolicyURL: external, TokenText: pe.TokenText})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.bodies) != 3 {
		t.Fatalf("%d /run calls", len(g.bodies))
	}
	bodies := map[string]map[string]json.RawMessage{}
	for _, b := range g.bodies {
		var id string
		json.Unmarshal(b["instance_id"], &id)
		bodies[id] = b
	}
	b := bodies["inst-0"]
	for k, v := range map[string]string{"repo": `"django/django"`, "FAIL_TO_PASS": `["a"]`, "extra": `{"k":1}`, "policy_api_key": `"` + key + `"`} {
		if string(b[k]) != v {
			t.Errorf("%s = %s, want %s", k, b[k], v)
		}
	}
	var rcp map[string]any
	json.Unmarshal(b["responses_create_params"], &rcp)
	if in, _ := rcp["input"].([]any); len(in) != 1 || rcp["temperature"] != 0.7 || rcp["top_p"] != 0.95 || rcp["max_output_tokens"] != 512.0 || rcp["metadata"] == nil {
		t.Errorf("responses_create_params %v", rcp)
	}
	var pbu string
	json.Unmarshal(b["policy_base_url"], &pbu)
	if !strings.HasPrefix(pbu, external+"/sessions/") || !strings.HasSuffix(pbu, "/v1") {
		t.Errorf("policy_base_url %q, want under %s", pbu, external)
	}
	m := bodies["err-1"]
	if string(m["subset"]) != `"gym"` || m["prompt"] != nil || string(m["responses_create_params"]) != `{"input":[],"max_output_tokens":512,"temperature":0.7,"top_p":0.95}` {
		t.Errorf("Miles's line sent as %v", m)
	}
	got := byTask(t, filepath.Join(jobs, "b"))
	ok := got["inst-0"][0]
	if s := ok.s[0]; s.Status != "COMPLETED" || *s.Reward != 1 || s.SessionID == "" || !strings.Contains(pbu, s.SessionID) {
		t.Fatalf("inst-0: %s %v session %q", s.Status, *s.Reward, s.SessionID)
	}
	var reply map[string]any
	rollouttest.ReadJSON(t, filepath.Join(ok.dir, rollout.GymReplyFile), &reply)
	if reply["instance_id"] != "inst-0" {
		t.Fatalf("gym_response.json %v", reply)
	}
	// The sample is the conversation Gym had, token for token.
	pe.CheckMask(t, ok.dir, ok.s[0])
	pe.CheckRendering(t, ok.dir, ok.s[0], []rollouttest.Message{{Role: "system", Content: "Reply with one bash block."}, {Role: "user", Content: "p0"}, {Role: "assistant", Content: policy.BashAnswer("go", "echo 042")}})

	bad := got["err-1"][0]
	if s := bad.s[0]; s.Status != "COMPLETED" || *s.Reward != 0 || s.Metadata.ExitStatus != rollout.AgentError ||
		s.Metadata.EvalReport["error"] != "sandbox create failed: 503" || bad.r.ExceptionInfo == nil || bad.r.ExceptionInfo.ExceptionType != string(trial.AgentError) {
		t.Fatalf("Gym's error: %s %v %s %v %+v", s.Status, *s.Reward, s.Metadata.ExitStatus, s.Metadata.EvalReport, bad.r.ExceptionInfo)
	}
	echo := got["echo-2"][0].s[0]
	if echo.Status != "ABORTED" || !strings.Contains(echo.Metadata.AbortReason, `"policy_api_key":"[policy_api_key]"`) {
		t.Fatalf("a 422 repeating the request: %s %q", echo.Status, echo.Metadata.AbortReason)
	}
	// The session server's key is nowhere in what the rollout wrote.
	filepath.WalkDir(jobs, func(p string, d os.DirEntry, err error) error {
		if b, _ := os.ReadFile(p); err == nil && !d.IsDir() && bytes.Contains(b, []byte(key)) {
			t.Errorf("%s holds the session server's key", p)
		}
		return nil
	})
	if res.Rollout.MeanReward != 1.0/3 {
		t.Fatalf("mean reward %v", res.Rollout.MeanReward)
	}
}

// The tasks file is refused line by line; names from instance ids stay
// inside the job directory.
func TestGymTasksFile(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]struct{ body, err string }{
		"array":   {`[1,2]`, "line 1: not a JSON object"},
		"rcp":     {"{}\n" + `{"responses_create_params":"x"}`, "line 2: responses_create_params is not a JSON object"},
		"id":      {`{"instance_id":7}`, "line 1: instance_id is not a string"},
		"empty":   {"\n\n", "holds no task"},
		"garbage": {`{"a":`, "line 1: not a JSON object"},
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(c.body), 0o644)
		if _, err := rollout.LoadGymTasks(p); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want %q", name, err, c.err)
		}
	}
	pe := rollouttest.NewPolicyEngine(t, policy.GymWrong)
	_, gymURL := newFakeGym(t, nil)
	p := filepath.Join(dir, "hostile.jsonl")
	os.WriteFile(p, []byte(`{"instance_id":"../../../../tmp/x"}`+"\n"+`{"instance_id":".."}`+"\n"+`{"problem_statement":"no id"}`), 0o644)
	_, job, err := gymRun(t.Context(), t, pe, gymURL, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, d := range rollouttest.TrialDirs(t, job) {
		if filepath.Dir(d) != job {
			t.Fatalf("%s is outside %s", d, job)
		}
		n, _, _ := strings.Cut(filepath.Base(d), "__")
		names[n] = true
	}
	for _, n := range []string{"_._.._.._.._tmp_x", "_.", "line-3"} {
		if !names[n] {
			t.Errorf("no sample dir named %s__*: %v", n, names)
		}
	}
}
