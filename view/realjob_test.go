package view_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/testing/testbin"
	"github.com/berth-sh/berth/providers/local"
)

// TestMain removes the berth binary the real-job test built.
func TestMain(m *testing.M) { testbin.Main(m) }

// Scripts of the fixture's tasks, written as task authors write them.
const (
	fxSolve      = "#!/bin/sh\necho \"writing the answer\"\necho 42 > /tmp/answer\necho done\n"
	fxTest       = "#!/bin/sh\necho \"checking /tmp/answer\"\nif [ \"$(cat /tmp/answer 2>/dev/null)\" = 42 ]; then echo PASS; echo 1 > /logs/verifier/reward.txt; else echo FAIL; echo 0 > /logs/verifier/reward.txt; fi\n"
	fxTestJSON   = "#!/bin/sh\necho '{\"reward\": 1, \"accuracy\": 1, \"tests_passed\": 4}' > /logs/verifier/reward.json\n"
	fxTestHalf   = "#!/bin/sh\necho '3 of 6 tests pass'\necho '{\"reward\": 0.5}' > /logs/verifier/reward.json\n"
	fxSolveWrong = "#!/bin/sh\necho 41 > /tmp/answer\n"
	fxSolveExit  = "#!/bin/sh\necho 'cannot solve this' >&2\nexit 3\n"
	fxSleep      = "#!/bin/sh\nsleep 30\n"
	fxNoReward   = "#!/bin/sh\necho 'forgot to write a reward'\n"
	fxEmpty      = "#!/bin/sh\n: > /logs/verifier/reward.txt\n"
	fxGarbage    = "#!/bin/sh\necho 'PASSED' > /logs/verifier/reward.txt\n"
	// The trajectory task's solution also writes an ATIF trajectory, as an
	// LLM agent's harness would, so the trial page has turns to show.
	fxSolveTraj = `#!/bin/sh
echo 42 > /tmp/answer
cat > /logs/agent/trajectory.json <<'JSON'
{"schema_version": "ATIF-v1.4", "session_id": "fixture", "agent": {"name": "terminus-2", "version": "2.0", "model_name": "qwen3-8b"},
 "steps": [
  {"step_id": 1, "source": "system", "message": "You are an agent in a Linux sandbox. Use the bash tool."},
  {"step_id": 2, "source": "user", "message": "Write the answer to life, the universe and everything to /tmp/answer."},
  {"step_id": 3, "source": "agent", "message": "I will write 42 to /tmp/answer and check it.",
   "reasoning_content": "The answer is 42.",
   "tool_calls": [{"tool_call_id": "call_1", "function_name": "bash", "arguments": {"command": "echo 42 > /tmp/answer && cat /tmp/answer"}}],
   "observation": {"results": [{"source_call_id": "call_1", "content": "42\n"}]},
   "metrics": {"prompt_tokens": 412, "completion_tokens": 38}},
  {"step_id": 4, "source": "agent", "message": "The file holds 42. Done.", "metrics": {"prompt_tokens": 470, "completion_tokens": 9}}
 ]}
JSON
echo "wrote /tmp/answer"
`
	// The attack task writes markup and javascript: URLs everywhere a task
	// can: its output, its trajectory, the verifier's output and a reward
	// file whose one key is a script.
	fxSolveXSS = "#!/bin/sh\necho 42 > /tmp/answer\nprintf '%s\\n' '" + `<script>window.__xss=1</script>"><img src=x onerror="window.__xss=2"> javascript:window.__xss=3 x' onmouseover='window.__xss=4` + "'\n" +
		"cat > /logs/agent/trajectory.json <<'JSON'\n" + xssTrajectory + "\nJSON\n"
	fxTestXSS    = "#!/bin/sh\necho '<script>window.__xss=14</script>\"><a href=\"javascript:window.__xss=15\">x</a>'\necho '{\"<script>window.__xss=16</script>\": 1}' > /logs/verifier/reward.json\n"
	fxTestXSSTxt = "#!/bin/sh\necho '<img src=x onerror=window.__xss=17>' > /logs/verifier/reward.txt\n"
)

func fxTOML(agentSec, verifierSec, extra string) string {
	return fmt.Sprintf("schema_version = \"1.1\"\n[agent]\ntimeout_sec = %s\n[verifier]\ntimeout_sec = %s\n[environment]\ndocker_image = \"berth.local/busybox:latest\"\nallow_internet = false\n%s", agentSec, verifierSec, extra)
}

// fixtureTasks writes 25 tasks: passing ones (one with a trajectory),
// partial and zero rewards, a failing solution, and every failure berth
// records that a task can cause: agent and verifier timeouts, missing,
// empty and unparsable reward files, an environment error and an
// environment start timeout, an agent error (no solution) and an invalid
// task; plus two attack tasks.
func fixtureTasks(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ok := fxTOML("30.0", "30.0", "")
	type task struct{ name, toml, solve, test string }
	tasks := []task{
		{"hello-trajectory", ok, fxSolveTraj, fxTest},
		{"half-credit", ok, fxSolve, fxTestHalf},
		{"wrong-answer", ok, fxSolveWrong, fxTest},
		{"solution-exits-3", ok, fxSolveExit, fxTest},
		{"agent-timeout", fxTOML("1.0", "30.0", ""), fxSleep, fxTest},
		{"verifier-timeout", fxTOML("30.0", "1.0", ""), fxSolve, fxSleep},
		{"no-reward-file", ok, fxSolve, fxNoReward},
		{"empty-reward-file", ok, fxSolve, fxEmpty},
		{"garbage-reward-file", ok, fxSolve, fxGarbage},
		{"healthcheck-fails", fxTOML("30.0", "30.0", "[environment.healthcheck]\ncommand = \"false\"\ninterval_sec = 0.1\nretries = 0\n"), fxSolve, fxTest},
		{"slow-environment", fxTOML("30.0", "30.0", "build_timeout_sec = 1.0\n[environment.healthcheck]\ncommand = \"sleep 30\"\ntimeout_sec = 60.0\n"), fxSolve, fxTest},
		{"no-solution", ok, "", fxTest},
		{"broken-task-toml", "schema_version = \"1.1\"\n[agent]\ntimeout_sec = \"soon\"\n", fxSolve, fxTest},
		{`xss-"><img src=x onerror=window.__xss=5>`, ok, fxSolveXSS, fxTestXSS},
		{`javascript:window.__xss=6`, ok, fxSolve, fxTestXSSTxt},
	}
	for i, n := range []string{"count-lines", "fix-permissions", "parse-json", "sort-csv", "git-bisect", "compile-hello",
		"tar-roundtrip", "find-large-files", "regex-log", "cron-schedule"} {
		test := fxTest
		if i%3 == 1 {
			test = fxTestJSON
		}
		tasks = append(tasks, task{n, ok, fxSolve, test})
	}
	for _, tk := range tasks {
		files := map[string]string{"task.toml": tk.toml, "instruction.md": "Task " + tk.name + ": write 42 to /tmp/answer.\n", "tests/test.sh": tk.test}
		if tk.solve != "" {
			files["solution/solve.sh"] = tk.solve
		}
		for p, body := range files {
			full := filepath.Join(dir, tk.name, p)
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(full, []byte(body), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(tasks) != 25 {
		t.Fatalf("%d tasks", len(tasks))
	}
	return dir
}

// runFixtureJob runs `berth run -k 2` on the local provider over the
// fixture tasks, as a user would, and returns the jobs directory: 50
// trials in Harbor's layout.
func runFixtureJob(t *testing.T) string {
	t.Helper()
	testbin.NeedLocal(t)
	bin, err := testbin.Berth()
	if err != nil {
		t.Fatal(err)
	}
	agent, err := testbin.Agent()
	if err != nil {
		t.Fatal(err)
	}
	tasks := fixtureTasks(t)
	jobs := t.TempDir()
	// A short state dir: the agent's socket path lives under it.
	state, err := os.MkdirTemp("", "berth-view-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if d, err := local.New(local.Options{StateDir: state, AgentBinary: agent}); err == nil {
			if left, _ := d.List(ctx, nil); len(left) > 0 {
				t.Errorf("sandboxes left after berth run: %d", len(left))
			}
			_, _ = d.Reap(ctx)
		}
		os.RemoveAll(state)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "-p", tasks, "-e", "local", "-k", "2", "-n", "6", "-o", jobs, "--job-name", "fixture")
	cmd.Env = append(os.Environ(), local.EnvStateDir+"="+state, local.EnvAgentBinary+"="+agent)
	out, err := cmd.CombinedOutput()
	t.Logf("berth run:\n%s", out)
	if err != nil {
		t.Fatalf("berth run: %v", err)
	}
	ents, _ := os.ReadDir(filepath.Join(jobs, "fixture"))
	n := 0
	for _, e := range ents {
		if e.IsDir() {
			n++
		}
	}
	if n != 50 {
		t.Fatalf("berth run made %d trial directories, want 50", n)
	}
	if !strings.Contains(string(out), "50 trials:") {
		t.Fatalf("berth run summary missing")
	}
	return jobs
}
