package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/testing/hfref"
	"github.com/berth-sh/berth/internal/testing/testbin"
)

// A Ctrl-C (a real SIGINT) in the middle of `berth rollout` against a
// session server of its own leaves no sandbox and no open session, and the
// trials that ran have ABORTED samples.
func TestRolloutInterrupted(t *testing.T) {
	bin, state := localState(t)
	tok := hfref.RequireQwen3(t)
	// No BERTH_AGENT_BINARY: berth finds berth-agent beside itself.
	env := append(os.Environ(), "BERTH_STATE_DIR="+state)

	// The session server, with the echoing test engine: the agent's turns
	// keep going (the echoes are partly commands, partly not) until the
	// interrupt.
	srv := exec.Command(bin, "session-server", "--engine", "test:", "--model-family", "qwen3", "--tokenizer", tok, "--addr", "127.0.0.1:0")
	srv.Env, srv.Stderr = env, io.Discard
	var base string
	fmt.Sscanf(startPrinting(t, srv, "# berth session-server: "), "%s", &base)

	tasks, jobs := t.TempDir(), t.TempDir()
	for i := range 4 {
		writeSleepTask(t, filepath.Join(tasks, fmt.Sprintf("task-%d", i)))
	}
	cmd := exec.Command(bin, "rollout", "-p", tasks, "--session-server", base, "-e", "local", "-n", "4", "-k", "2",
		"--max-turns", "100000", "-o", jobs, "--job-name", "ctrlc")
	cmd.Env = env
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Interrupt once the agents have talked to the model for a while.
	waitFor(t, 60*time.Second, func() bool { return metric(t, base, "berth_session_turns_total{outcome=\"committed\"}") >= 20 })
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatalf("the rollout was not interrupted:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "rollout cancelled") {
		t.Fatalf("output:\n%s", logs.String())
	}
	if live := sandboxesOf(t, bin, env, "ctrlc"); len(live) != 0 {
		t.Fatalf("Ctrl-C left sandboxes %v\n%s", live, logs.String())
	}
	if n := metric(t, base, "berth_session_sessions"); n != 0 {
		t.Fatalf("Ctrl-C left %v sessions open\n%s", n, logs.String())
	}
	samples, _ := filepath.Glob(filepath.Join(jobs, "ctrlc", "*", "samples.jsonl"))
	if len(samples) == 0 {
		t.Fatalf("no samples written\n%s", logs.String())
	}
	for _, p := range samples {
		b, _ := os.ReadFile(p)
		if !strings.Contains(string(b), `"status":"ABORTED"`) || !strings.Contains(string(b), "CancelledError") {
			t.Fatalf("%s: %s", p, b)
		}
	}
	if _, err := os.Stat(filepath.Join(jobs, "ctrlc", "rollout.json")); err != nil {
		t.Fatal(err)
	}
}

// localState skips without root and runc, and returns the static berth
// binary and a local state dir that is emptied and removed after the test.
func localState(t *testing.T) (bin, state string) {
	t.Helper()
	testbin.NeedLocal(t)
	bin, err := testbin.Berth()
	if err != nil {
		t.Fatal(err)
	}
	// Short: the agents' socket paths live under it (108-byte limit).
	if state, err = os.MkdirTemp("", "berth-cli-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeState(state, bin) })
	return bin, state
}

// metric reads one series of a Prometheus /metrics page.
func metric(t *testing.T, base, series string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return 0
}

// agentFor returns the static berth-agent, for a test that runs berth's
// verbs in its own process (where no berth-agent lies beside the
// executable).
func agentFor(t *testing.T) string {
	t.Helper()
	agent, err := testbin.Agent()
	if err != nil {
		t.Fatal(err)
	}
	return agent
}
