package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth/internal/testing/hfref"
)

// `berth rollout --max-samples 2` on local sandboxes, two quick tasks and
// two whose solution sleeps for minutes (the golden test engine runs each
// task's solution): once the quick ones have their samples the rollout
// ends, successfully; the sleeping trials are cancelled, leave no
// sandbox, and their samples are ABORTED with the reason.
func TestRolloutMaxSamples(t *testing.T) {
	bin, state := localState(t)
	tok := hfref.RequireQwen3(t)
	env := append(os.Environ(), "BERTH_STATE_DIR="+state)
	tasks, jobs := t.TempDir(), t.TempDir()
	for i, solve := range []string{"echo 42 > /tmp/answer", "echo 42 > /tmp/answer", "sleep 300", "sleep 300"} {
		name := fmt.Sprintf("quick-%d", i)
		if i >= 2 {
			name = fmt.Sprintf("slow-%d", i)
		}
		writeTask(t, filepath.Join(tasks, name), map[string]string{
			"task.toml": "schema_version = \"1.1\"\n[agent]\ntimeout_sec = 600.0\n[verifier]\ntimeout_sec = 60.0\n" +
				"[environment]\ndocker_image = \"berth.local/busybox:latest\"\nallow_internet = false\n",
			"instruction.md":    "Write 42, task " + name + ".\n",
			"solution/solve.sh": "#!/bin/sh\n" + solve + "\n",
			"tests/test.sh":     "#!/bin/sh\n[ \"$(cat /tmp/answer)\" = 42 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n",
		})
	}
	cmd := exec.Command(bin, "rollout", "-p", tasks, "--engine", "test:golden", "--model-family", "qwen3", "--tokenizer", tok,
		"-e", "local", "-n", "4", "-k", "1", "--max-samples", "2", "-o", jobs, "--job-name", "maxs")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "stopped: max samples reached: 2 samples of 2 collected") {
		t.Fatalf("rollout: %v\n%s", err, out)
	}
	if live := sandboxesOf(t, bin, env, "maxs"); len(live) != 0 {
		t.Fatalf("sandboxes left: %v\n%s", live, out)
	}
	lines, _ := filepath.Glob(filepath.Join(jobs, "maxs", "*", "samples.jsonl"))
	if len(lines) != 4 {
		t.Fatalf("%d trials wrote samples\n%s", len(lines), out)
	}
	for _, p := range lines {
		b, _ := os.ReadFile(p)
		var l struct {
			Status   string `json:"status"`
			Metadata struct {
				AbortReason string `json:"abort_reason"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(b, &l); err != nil {
			t.Fatal(err)
		}
		want, reason := "COMPLETED", ""
		if strings.Contains(p, "slow-") {
			want, reason = "ABORTED", "CancelledError: max samples reached: 2 samples of 2 collected"
		}
		if l.Status != want || l.Metadata.AbortReason != reason {
			t.Errorf("%s: %s %q", p, l.Status, l.Metadata.AbortReason)
		}
	}
}

func writeTask(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}
