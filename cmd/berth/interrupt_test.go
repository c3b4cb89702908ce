package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A Ctrl-C and a kill -9 in the middle of a 50-trial job on the local
// provider leave no sandbox behind (teardown on Ctrl-C; the job's label
// and --resume for what a kill -9 left), and --resume completes the job.

const interruptTrials = 50

func TestInterruptedJobs(t *testing.T) {
	bin, agent := localBinaries(t)
	tasks := t.TempDir()
	for i := range interruptTrials {
		writeSleepTask(t, filepath.Join(tasks, fmt.Sprintf("task-%02d", i)))
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			state, jobs := t.TempDir(), t.TempDir()
			env := append(os.Environ(), "BERTH_STATE_DIR="+state, "BERTH_AGENT_BINARY="+agent)
			jobName := "interrupt-" + strings.ReplaceAll(sig.String(), " ", "-")
			jobDir := filepath.Join(jobs, jobName)

			cmd := exec.Command(bin, "run", "-p", tasks, "-n", "8", "-o", jobs, "--job-name", jobName)
			cmd.Env = env
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Interrupt once a few trials have finished and others run.
			waitFor(t, 60*time.Second, func() bool { return finishedTrials(jobDir) >= 5 })
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			err := cmd.Wait()
			if err == nil {
				t.Fatalf("the job was not interrupted:\n%s", out.String())
			}
			live := sandboxesOf(t, bin, env, jobName)
			if sig == syscall.SIGINT {
				if len(live) != 0 {
					t.Fatalf("Ctrl-C left %d sandboxes: %v\n%s", len(live), live, out.String())
				}
				var res struct {
					FinishedAt string `json:"finished_at"`
					Stats      struct {
						Cancelled int `json:"n_cancelled_trials"`
					} `json:"stats"`
				}
				readJSONFile(t, filepath.Join(jobDir, "result.json"), &res)
				if res.FinishedAt == "" || res.Stats.Cancelled == 0 {
					t.Fatalf("result.json after Ctrl-C: %+v", res)
				}
			} else {
				t.Logf("kill -9 left %d sandboxes running until their TTL or a resume", len(live))
			}

			resume := exec.Command(bin, "run", "--resume", jobDir)
			resume.Env = env
			if b, err := resume.CombinedOutput(); err != nil {
				t.Fatalf("resume: %v\n%s", err, b)
			}
			if n := finishedTrials(jobDir); n != interruptTrials {
				t.Fatalf("after resume %d trials have results, want %d", n, interruptTrials)
			}
			var res struct {
				Stats struct {
					Completed int `json:"n_completed_trials"`
					Errored   int `json:"n_errored_trials"`
				} `json:"stats"`
			}
			readJSONFile(t, filepath.Join(jobDir, "result.json"), &res)
			if res.Stats.Completed != interruptTrials || res.Stats.Errored != 0 {
				t.Fatalf("after resume: %+v", res.Stats)
			}
			if live := sandboxesOf(t, bin, env, jobName); len(live) != 0 {
				t.Fatalf("sandboxes left after resume: %v", live)
			}
		})
	}
}

func writeSleepTask(t *testing.T, dir string) {
	t.Helper()
	files := map[string]string{
		"task.toml": "schema_version = \"1.1\"\n[agent]\ntimeout_sec = 60.0\n[verifier]\ntimeout_sec = 60.0\n" +
			"[environment]\ndocker_image = \"berth.local/busybox:latest\"\nallow_internet = false\n",
		"instruction.md":    "Write 42.\n",
		"solution/solve.sh": "#!/bin/sh\nsleep 0.5\necho 42 > /tmp/answer\n",
		"tests/test.sh":     "#!/bin/sh\n[ \"$(cat /tmp/answer)\" = 42 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n",
	}
	writeTask(t, dir, files)
}

// finishedTrials counts trial directories holding a result.json.
func finishedTrials(jobDir string) int {
	m, _ := filepath.Glob(filepath.Join(jobDir, "*", "result.json"))
	n := 0
	for _, p := range m {
		var r struct {
			Exc *struct {
				Type string `json:"exception_type"`
			} `json:"exception_info"`
		}
		if b, err := os.ReadFile(p); err == nil && json.Unmarshal(b, &r) == nil && (r.Exc == nil || r.Exc.Type != "CancelledError") {
			n++
		}
	}
	return n
}

func sandboxesOf(t *testing.T, bin string, env []string, job string) []string {
	t.Helper()
	cmd := exec.Command(bin, "sandboxes", "ls", "--label", "berth.job="+job, "--json")
	cmd.Env = env
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("sandboxes ls: %v", err)
	}
	var infos []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(b, &infos); err != nil {
		t.Fatalf("sandboxes ls --json: %v: %s", err, b)
	}
	var ids []string
	for _, in := range infos {
		ids = append(ids, in.ID)
	}
	return ids
}

func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readJSONFile(t *testing.T, p string, v any) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
}
