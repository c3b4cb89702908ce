package rollouttest

import (
	"bufio"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/berth-sh/berth/harbor/task"
	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/internal/apikeys"
	"github.com/berth-sh/berth/internal/testing/qwen3test"
	"github.com/berth-sh/berth/results"
	"github.com/berth-sh/berth/results/layout"
	"github.com/berth-sh/berth/rollout/policy"
	"github.com/berth-sh/berth/session"
	"github.com/berth-sh/berth/session/engine"
	"github.com/berth-sh/berth/session/testengine"
	"github.com/berth-sh/berth/session/tito"
)

// Qwen3 is Qwen3's real tokenizer and template (the npm reference package).
func Qwen3(t testing.TB) *tito.Codec { return qwen3test.Codec(t) }

// PolicyEngine is the test engine behind a session server, both on
// loopback. It remembers every reply it gave, by session, so that tests
// know which tokens the model produced.
type PolicyEngine struct {
	t     testing.TB
	codec *tito.Codec
	eng   *testengine.Engine
	srv   *session.Server
	url   string
	// Client is the session server's client.
	Client *session.Client

	mu      sync.Mutex
	replies map[string]map[string]string // session -> prompt ids (as a key) -> reply text
}

func NewPolicyEngine(t testing.TB, script testengine.Script) *PolicyEngine {
	t.Helper()
	return NewKeyedPolicyEngine(t, script, "")
}

// NewKeyedPolicyEngine is NewPolicyEngine with a session server that
// requires key (none when ""); Client carries it.
func NewKeyedPolicyEngine(t testing.TB, script testengine.Script, key string) *PolicyEngine {
	t.Helper()
	c := Qwen3(t)
	pe := &PolicyEngine{t: t, codec: c, replies: map[string]map[string]string{}}
	recording := func(call testengine.Call) testengine.Reply {
		rep := script(call)
		if rep.Status == 0 || rep.Status == http.StatusOK {
			pe.mu.Lock()
			if pe.replies[call.RoutingKey] == nil {
				pe.replies[call.RoutingKey] = map[string]string{}
			}
			pe.replies[call.RoutingKey][fmt.Sprint(call.InputIDs)] = rep.Text
			pe.mu.Unlock()
		}
		return rep
	}
	te, err := testengine.New(c.Tok, recording, testengine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ets := httptest.NewServer(te)
	t.Cleanup(ets.Close)
	eng, err := engine.New(ets.URL, engine.SGLang, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := session.Options{Engine: eng, Codec: c}
	if key != "" {
		if o.Keys, err = apikeys.New(key); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := session.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { ts.Close(); srv.Close() })
	pe.eng, pe.srv, pe.url, pe.Client = te, srv, ts.URL, &session.Client{BaseURL: ts.URL, APIKey: key}
	return pe
}

func (pe *PolicyEngine) TokenText(id int) string {
	s, _ := pe.codec.Tok.Decode([]int{id}, false)
	return s
}

// LiveSessions reads the server's berth_session_sessions gauge.
func (pe *PolicyEngine) LiveSessions() int { return pe.Metric("berth_session_sessions") }

// Metric reads one series of the server's /metrics (its name and labels,
// as Prometheus writes them); the test fails when it is absent.
func (pe *PolicyEngine) Metric(series string) int {
	pe.t.Helper()
	resp, err := http.Get(pe.url + "/metrics")
	if err != nil {
		pe.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			var n float64
			fmt.Sscan(v, &n)
			return int(n)
		}
	}
	pe.t.Fatalf("no %s in /metrics", series)
	return 0
}

// tasks are the TB2-style test tasks (without docker_image).
//
//go:embed tasks
var tasks embed.FS

// WriteTasks writes the smoke task (from its directory, smoke/builtin-task)
// and the TB2-style test tasks into a new tasks directory, on image.
func WriteTasks(t testing.TB, image, smokeTask string) string {
	t.Helper()
	dir := t.TempDir()
	CopyTask(t, os.DirFS(smokeTask), filepath.Join(dir, "smoke"), image)
	for _, n := range []string{"csv-total", "pack-project"} {
		sub, _ := fs.Sub(tasks, "tasks/"+n)
		CopyTask(t, sub, filepath.Join(dir, n), image)
	}
	return dir
}

// CopyTask copies a task directory whose task.toml ends with its
// [environment] table, adding docker_image there.
func CopyTask(t testing.TB, from fs.FS, to, image string) {
	t.Helper()
	if err := os.CopyFS(to, from); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"solution/solve.sh", "tests/test.sh"} {
		os.Chmod(filepath.Join(to, s), 0o755)
	}
	f, err := os.OpenFile(filepath.Join(to, "task.toml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintf(f, "docker_image = %q\n", image)
}

// Golden is the golden policy over the tasks in dir.
func Golden(t testing.TB, dir string) testengine.Script {
	t.Helper()
	tasks, err := task.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	sol, err := policy.Solutions(tasks, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	return policy.Golden(tasks, sol)
}

// TrialDirs lists the job's trial directories.
func TrialDirs(t testing.TB, jobDir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(jobDir, "*__*"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(m)
	return m
}

func ReadJSON(t testing.TB, p string, v any) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
}

// Sample is a samples.jsonl line as the tests read it.
type Sample struct {
	Tokens     []int     `json:"tokens"`
	TokenTexts []string  `json:"token_texts"`
	LossMask   []int     `json:"loss_mask"`
	LogProbs   []float64 `json:"rollout_log_probs"`
	Status     string    `json:"status"`
	Reward     *float64  `json:"reward"`
	SessionID  string    `json:"session_id"`
	Metadata   struct {
		Reward       float64          `json:"reward"`
		ExitStatus   string           `json:"exit_status"`
		AbortReason  string           `json:"abort_reason"`
		AgentMetrics map[string]any   `json:"agent_metrics"`
		EvalReport   map[string]any   `json:"eval_report"`
		Mismatch     *[]tito.Mismatch `json:"tito_session_mismatch"`
		TITOCounters map[string]int   `json:"tito_mismatch"`
	} `json:"metadata"`
}

func ReadSamples(t testing.TB, dir string) []Sample {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, layout.SamplesFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// The viewer's own reader must take every line without a problem.
	sf, err := results.ReadSamples(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	if len(sf.Errors) > 0 {
		t.Fatalf("%s: the viewer rejects lines: %v", dir, sf.Errors)
	}
	for _, s := range sf.Samples {
		if len(s.Problems) > 0 {
			t.Fatalf("%s: the viewer sees problems: %v", dir, s.Problems)
		}
	}
	f.Seek(0, 0)
	var out []Sample
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var l Sample
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

// CheckSample checks a completed sample against what the model said and
// the trajectory: the loss mask is 1 exactly on the tokens the model
// produced, and the tokens decode to the conversation the agent had.
func (pe *PolicyEngine) CheckSample(t testing.TB, dir string, s Sample) {
	t.Helper()
	pe.CheckMask(t, dir, s)
	// The tokens decode to the conversation in agent/trajectory.json,
	// rendered with the model's template.
	var traj results.Trajectory // as berth view reads it
	ReadJSON(t, filepath.Join(dir, "agent", "trajectory.json"), &traj)
	var msgs []Message
	for _, st := range traj.Steps {
		switch st.Source {
		case "system", "user":
			msgs = append(msgs, Message{st.Source, st.Message()})
		case "agent":
			msgs = append(msgs, Message{"assistant", st.Message()})
			if obs := st.Observations(); len(obs) > 0 {
				msgs = append(msgs, Message{"user", obs[0].Content})
			}
		}
	}
	pe.CheckRendering(t, dir, s, msgs)
}

// Message is a chat message of a transcript.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// CheckMask checks that a sample's loss mask is 1 exactly on the tokens
// the model produced (its recorded replies, each after its prompt), and
// that observation tokens have no logprob.
func (pe *PolicyEngine) CheckMask(t testing.TB, dir string, s Sample) {
	t.Helper()
	n := len(s.Tokens)
	if len(s.LossMask) != len(s.LogProbs) || len(s.LossMask) > n || len(s.TokenTexts) != n {
		t.Fatalf("%s: %d tokens, %d mask, %d logprobs, %d texts", dir, n, len(s.LossMask), len(s.LogProbs), len(s.TokenTexts))
	}
	// Where the model's tokens are: each recorded reply, after its prompt.
	model := make([]bool, n)
	pe.mu.Lock()
	replies := pe.replies[s.SessionID]
	pe.mu.Unlock()
	eos, _ := pe.codec.Tok.TokenID("<|im_end|>")
	spans := 0
	for prompt, text := range replies {
		var ids []int
		json.Unmarshal([]byte(strings.ReplaceAll(prompt, " ", ",")), &ids)
		if len(ids) > n || !slices.Equal(s.Tokens[:len(ids)], ids) {
			continue // a prompt of a turn that was not kept
		}
		out, _ := pe.codec.Tok.Encode(text)
		out = append(out, eos)
		end := min(len(ids)+len(out), n)
		if !slices.Equal(s.Tokens[len(ids):end], out[:end-len(ids)]) {
			t.Fatalf("%s: the model's reply is not in the sample's tokens after its prompt", dir)
		}
		for i := len(ids); i < end; i++ {
			model[i] = true
		}
		spans++
	}
	if spans == 0 {
		t.Fatalf("%s: no model reply found in the sample", dir)
	}
	start := n - len(s.LossMask)
	for i := 0; i < n; i++ {
		mask := i >= start && s.LossMask[i-start] == 1
		if mask != model[i] {
			t.Fatalf("%s: token %d (%q): loss mask %v, model token %v", dir, i, s.TokenTexts[i], mask, model[i])
		}
		if i >= start && !model[i] && s.LogProbs[i-start] != 0 {
			t.Fatalf("%s: observation token %d has logprob %v", dir, i, s.LogProbs[i-start])
		}
	}
}

// CheckRendering checks that a sample's tokens decode to the transcript
// msgs rendered with the model's template.
func (pe *PolicyEngine) CheckRendering(t testing.TB, dir string, s Sample, transcript []Message) {
	t.Helper()
	var msgs []tito.Message
	for _, m := range transcript {
		raw, _ := json.Marshal(m)
		tm, err := tito.ParseMessage(raw)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, tm)
	}
	kw, _ := pe.codec.MergeKwargs(nil)
	want, err := pe.codec.Render(msgs, tito.Tools{}, false, kw)
	if err != nil {
		t.Fatal(err)
	}
	// Qwen3's template writes an empty think block into the assistant
	// turns after the last user message; the scripted model wrote none (the
	// assistant_text drift the gate does not count).
	want = strings.ReplaceAll(want, "<|im_start|>assistant\n<think>\n\n</think>\n\n", "<|im_start|>assistant\n")
	got, _ := pe.codec.Tok.Decode(s.Tokens, false)
	if s.Status == "TRUNCATED" {
		// The last reply was cut: the tokens stop inside its rendering.
		if !strings.HasPrefix(want, got) {
			t.Fatalf("%s: the truncated sample's tokens decode to\n%q\nwhich does not begin the transcript\n%q", dir, got, want)
		}
	} else if strings.TrimRight(got, "\n") != strings.TrimRight(want, "\n") {
		t.Fatalf("%s: the sample's tokens decode to\n%q\nthe transcript renders as\n%q", dir, got, want)
	}
}

// TrialResult reads a trial's result.json.
func TrialResult(t testing.TB, dir string) *trial.Result {
	t.Helper()
	var r trial.Result
	ReadJSON(t, filepath.Join(dir, "result.json"), &r)
	return &r
}
