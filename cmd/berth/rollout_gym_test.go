package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/testing/gymtest"
	"github.com/berth-sh/berth/internal/testing/hfref"
	"github.com/berth-sh/berth/internal/testing/nettest"
	"github.com/berth-sh/berth/internal/testing/testbin"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/rollout"
)

// gymInstances are SWE-bench style instances for Gym's stand-in on the
// local provider's busybox image: test_command judges (the stand-in's
// SWE-bench harness), solution is what the golden policy runs.
var gymInstances = []map[string]any{
	{"instance_id": "berth__answer-1", "repo": "berth/answer", "base_commit": "0123abc", "problem_statement": "Write 42 to /tmp/answer.",
		"FAIL_TO_PASS": []string{"test_answer"}, "subset": "gym", "split": "train", "image": local.DefaultImage,
		"test_command": `test "$(cat /tmp/answer)" = 42`, "solution": "echo 42 > /tmp/answer && cat /tmp/answer"},
	{"instance_id": "berth__sum-2", "repo": "berth/sum", "base_commit": "4567def", "problem_statement": "Write the sum of 2 and 3 to /tmp/sum.",
		"FAIL_TO_PASS": []string{"test_sum"}, "subset": "gym", "split": "train", "image": local.DefaultImage,
		"test_command": `test "$(cat /tmp/sum)" = 5`, "solution": "echo $((2+3)) > /tmp/sum && cat /tmp/sum"},
}

// recorder keeps the /run bodies a Gym server was sent.
type recorder struct {
	next   http.Handler
	mu     sync.Mutex
	bodies []map[string]any
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path == "/run" {
		b, _ := io.ReadAll(req.Body)
		var m map[string]any
		json.Unmarshal(b, &m)
		r.mu.Lock()
		r.bodies = append(r.bodies, m)
		r.mu.Unlock()
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	r.next.ServeHTTP(w, req)
}

// Gym end to end on local: `berth serve` over the local provider speaks
// OpenSandbox, the stand-in for Gym's mini_swe_agent_2 agent server
// (internal/testing/gymtest) runs its sandboxes there, and `berth rollout
// --connector nemo-gym` hands it, per sample, a fresh session of its
// in-process session server (listening on one address, known to Gym by
// another, with a key of its own). With the scripted test engine as the
// golden policy every sample gets reward 1; as a wrong policy reward 0;
// both complete, hold the episode's turns and pass the strict gate
// (special_token_count, special_token_type and non_assistant_text at 0;
// the stand-in sends back only role and content, so assistant_text is the
// expected drift). No sandbox is left.
func TestRolloutGymLocal(t *testing.T) {
	bin, state := localState(t)
	tok := hfref.RequireQwen3(t)
	env := append(os.Environ(), local.EnvStateDir+"="+state, local.EnvAgentBinary+"="+bin)

	const serveKey = "berth_gym_serve_0123456789abcdef0123"
	keyFile := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keyFile, []byte(serveKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := exec.Command(bin, "serve", "--backend", "local", "--addr", "127.0.0.1:0", "--api-keys", keyFile,
		"--opensandbox-image", "berth.local/", "--pool", "0", "--log-level", "warn")
	srv.Env = env
	domain := startPrinting(t, srv, "export OPENSANDBOX_DOMAIN=")
	gym := &recorder{next: gymtest.New(gymtest.Options{OpenSandboxURL: "http://" + domain, APIKey: serveKey})}
	gts := httptest.NewServer(gym)
	t.Cleanup(gts.Close)

	var lines bytes.Buffer
	for _, in := range gymInstances {
		b, _ := json.Marshal(in)
		lines.Write(append(b, '\n'))
	}
	tasks := filepath.Join(t.TempDir(), "swe.jsonl")
	os.WriteFile(tasks, lines.Bytes(), 0o644)
	jobs := t.TempDir()
	port := nettest.FreePort(t)
	external := fmt.Sprintf("http://localhost:%d", port)

	for _, c := range []struct {
		engine string
		reward float64
		golden bool // the first command is the instance's solution, else a guess
	}{{"test:golden", 1, true}, {"test:wrong", 0, false}} {
		name := strings.TrimPrefix(c.engine, "test:")
		t.Run(name, func(t *testing.T) {
			gym.mu.Lock()
			gym.bodies = nil
			gym.mu.Unlock()
			cmd := exec.Command(bin, "rollout", "--connector", "nemo-gym", "--gym-url", gts.URL, "-p", tasks,
				"--engine", c.engine, "--model-family", "qwen3", "--tokenizer", tok, "-k", "2", "-n", "4", "--strict",
				"--session-addr", fmt.Sprintf("127.0.0.1:%d", port), "--external-url", external,
				"--temperature", "0.6", "--top-p", "0.9", "--max-output-tokens", "2048", "-o", jobs, "--job-name", name)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("berth rollout: %v\n%s", err, out)
			}
			t.Logf("\n%s", out)
			var sum rollout.Summary
			readJSONFile(t, filepath.Join(jobs, name, rollout.SummaryFile), &sum)
			if sum.Samples != 4 || sum.Statuses["COMPLETED"] != 4 || sum.MeanReward != c.reward || sum.Checked != 4 ||
				len(sum.StrictFailures) != 0 || sum.ExitStatuses[rollout.Submitted] != 4 {
				t.Fatalf("rollout.json %+v", sum)
			}
			for _, g := range rollout.GatedMismatches {
				if r, ok := sum.MismatchRates[g]; !ok || r != 0 {
					t.Fatalf("gated mismatch rate %s = %v (%v)", g, r, ok)
				}
			}
			checkGymSamples(t, filepath.Join(jobs, name), c.reward, c.golden)
			checkGymBodies(t, gym, external)
		})
	}
	d, err := local.New(local.Options{StateDir: state, AgentBinary: bin})
	if err != nil {
		t.Fatal(err)
	}
	if infos, _ := d.List(context.Background(), nil); len(infos) != 0 {
		t.Fatalf("sandboxes left: %v", infos)
	}
}

// checkGymSamples reads each sample directory: its result.json for the
// viewer, and one complete sample holding the whole episode under its
// loss mask, with Gym's verdict.
func checkGymSamples(t *testing.T, jobDir string, reward float64, golden bool) {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(jobDir, "*__*"))
	if len(dirs) != 4 {
		t.Fatalf("%d sample dirs", len(dirs))
	}
	for _, d := range dirs {
		var r struct {
			TaskName       string `json:"task_name"`
			VerifierResult struct {
				Rewards map[string]float64 `json:"rewards"`
			} `json:"verifier_result"`
			ExceptionInfo any `json:"exception_info"`
		}
		readJSONFile(t, filepath.Join(d, "result.json"), &r)
		if r.VerifierResult.Rewards["reward"] != reward || r.ExceptionInfo != nil || !strings.HasPrefix(r.TaskName, "berth__") {
			t.Fatalf("%s: result.json %+v", d, r)
		}
		b, err := os.ReadFile(filepath.Join(d, "samples.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			TokenTexts []string `json:"token_texts"`
			LossMask   []int    `json:"loss_mask"`
			Status     string   `json:"status"`
			Reward     float64  `json:"reward"`
			Metadata   struct {
				ExitStatus string         `json:"exit_status"`
				EvalReport map[string]any `json:"eval_report"`
				SessionID  string         `json:"session_id"`
			} `json:"metadata"`
		}
		if n := bytes.Count(b, []byte("\n")); n != 1 {
			t.Fatalf("%s: %d samples", d, n)
		}
		json.Unmarshal(b, &s)
		ones := 0
		for _, m := range s.LossMask {
			ones += m
		}
		text := strings.Join(s.TokenTexts, "")
		if s.Status != "COMPLETED" || s.Reward != reward || s.Metadata.ExitStatus != rollout.Submitted || s.Metadata.SessionID == "" ||
			s.Metadata.EvalReport["resolved"] != (reward == 1) || s.Metadata.EvalReport["submitted"] != true {
			t.Fatalf("%s: sample %s reward %v %+v", d, s.Status, s.Reward, s.Metadata)
		}
		step := "echo guessing"
		for _, in := range gymInstances {
			if golden && in["instance_id"] == r.TaskName {
				step = in["solution"].(string)
			}
		}
		if ones == 0 || ones == len(s.LossMask) || !strings.Contains(text, "```bash\n"+step+"\n```") || !strings.Contains(text, "<returncode>0</returncode>") ||
			!strings.Contains(text, "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT") {
			t.Fatalf("%s: %d of %d tokens trained on; text %q", d, ones, len(s.LossMask), text)
		}
		if _, err := os.Stat(filepath.Join(d, rollout.SafetensorsFile)); err != nil {
			t.Fatal(err)
		}
	}
}

// checkGymBodies checks what Gym was sent: the instance's fields, the
// sampling settings, a session under the external URL with its key.
func checkGymBodies(t *testing.T, gym *recorder, external string) {
	t.Helper()
	gym.mu.Lock()
	defer gym.mu.Unlock()
	if len(gym.bodies) != 4 {
		t.Fatalf("%d /run calls", len(gym.bodies))
	}
	seen := map[string]bool{}
	for _, b := range gym.bodies {
		pbu, _ := b["policy_base_url"].(string)
		key, _ := b["policy_api_key"].(string)
		rcp, _ := b["responses_create_params"].(map[string]any)
		if !strings.HasPrefix(pbu, external+"/sessions/") || !strings.HasSuffix(pbu, "/v1") || seen[pbu] || !strings.HasPrefix(key, "berth_") ||
			b["base_commit"] == nil || b["FAIL_TO_PASS"] == nil || b["subset"] != "gym" ||
			rcp["temperature"] != 0.6 || rcp["top_p"] != 0.9 || rcp["max_output_tokens"] != 2048.0 {
			t.Fatalf("/run body: %v", b)
		}
		seen[pbu] = true
	}
}

// startPrinting starts a server process and returns the rest of its first
// stdout line starting with prefix; the process is stopped at cleanup. Its
// stderr is the test's unless cmd sets one.
func startPrinting(t *testing.T, cmd *exec.Cmd, prefix string) string {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			go io.Copy(io.Discard, out)
			return v
		}
	}
	t.Fatalf("%s printed no %q: %v", cmd.Args[1], prefix, sc.Err())
	return ""
}

// A Ctrl-C (a real SIGINT) while `berth rollout --connector nemo-gym`
// waits on Gym's /run calls leaves no open session on the session server,
// and the samples that were running are ABORTED as cancelled.
func TestRolloutGymInterrupted(t *testing.T) {
	tok := hfref.RequireQwen3(t)
	bin, err := testbin.Berth()
	if err != nil {
		t.Fatal(err)
	}
	srv := exec.Command(bin, "session-server", "--engine", "test:", "--model-family", "qwen3", "--tokenizer", tok, "--addr", "127.0.0.1:0")
	srv.Stderr = io.Discard
	var base string
	fmt.Sscanf(startPrinting(t, srv, "# berth session-server: "), "%s", &base)

	// A Gym that asks the policy once, then waits until the caller leaves.
	var mu sync.Mutex
	waiting := 0
	gts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			URL string `json:"policy_base_url"`
		}
		json.NewDecoder(r.Body).Decode(&in)
		body := `{"model":"policy","messages":[{"role":"user","content":"fix it"}]}`
		if res, err := http.Post(in.URL+"/chat/completions", "application/json", strings.NewReader(body)); err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
		mu.Lock()
		waiting++
		mu.Unlock()
		<-r.Context().Done()
	}))
	t.Cleanup(gts.Close)
	tasks := filepath.Join(t.TempDir(), "tasks.jsonl")
	os.WriteFile(tasks, []byte(`{"instance_id":"a"}`+"\n"+`{"instance_id":"b"}`+"\n"+`{"instance_id":"c"}`+"\n"), 0o644)
	jobs := t.TempDir()
	cmd := exec.Command(bin, "rollout", "--connector", "nemo-gym", "--gym-url", gts.URL, "-p", tasks, "--session-server", base,
		"-n", "2", "-k", "2", "-o", jobs, "--job-name", "ctrlc")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return waiting == 2 })
	if n := metric(t, base, "berth_session_sessions"); n != 2 {
		t.Fatalf("%v sessions open while Gym runs 2 samples", n)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil || !strings.Contains(logs.String(), "rollout cancelled") {
		t.Fatalf("the rollout was not interrupted (%v):\n%s", err, logs.String())
	}
	if n := metric(t, base, "berth_session_sessions"); n != 0 {
		t.Fatalf("Ctrl-C left %v sessions open\n%s", n, logs.String())
	}
	samples, _ := filepath.Glob(filepath.Join(jobs, "ctrlc", "*", "samples.jsonl"))
	if len(samples) != 2 {
		t.Fatalf("%d samples files\n%s", len(samples), logs.String())
	}
	for _, p := range samples {
		b, _ := os.ReadFile(p)
		if !strings.Contains(string(b), `"status":"ABORTED"`) || !strings.Contains(string(b), "CancelledError") {
			t.Fatalf("%s: %s", p, b)
		}
	}
	var sum rollout.Summary
	readJSONFile(t, filepath.Join(jobs, "ctrlc", rollout.SummaryFile), &sum)
	if sum.Samples != 2 || sum.Statuses["ABORTED"] != 2 {
		t.Fatalf("rollout.json %+v", sum)
	}
}
