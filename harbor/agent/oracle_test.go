package agent_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-sh/berth/agent/selfdriver"
	"github.com/berth-sh/berth/harbor/agent"
	"github.com/berth-sh/berth/harbor/task"
	"github.com/berth-sh/berth/sandbox"
)

// A script still open for writing somewhere when it is run (a process
// forked during its upload holds the upload's descriptor until it execs)
// is refused with ETXTBSY; RunScript waits that out and runs it.
func TestRunScriptTextFileBusy(t *testing.T) {
	p, err := selfdriver.New()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := t.Context()
	sb, err := p.Create(ctx, sandbox.Spec{Image: "host", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Delete(ctx)
	dir := t.TempDir()
	script, logFile := filepath.Join(dir, "test.sh"), filepath.Join(dir, "out.txt")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	busy, err := os.OpenFile(script, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(300*time.Millisecond, func() { busy.Close() })
	start := time.Now()
	env := agent.Env{Sandbox: sb, Task: &task.Task{Workdir: dir}}
	if err := agent.RunScript(ctx, env, script, logFile, nil); err != nil {
		out, _ := os.ReadFile(logFile)
		t.Fatalf("run while the script was open for writing: %v (output %q)", err, out)
	}
	if out, _ := os.ReadFile(logFile); string(out) != "ran\n" {
		t.Errorf("output %q, want the script's own", out)
	}
	if time.Since(start) < 250*time.Millisecond {
		t.Errorf("ran in %v, before the writer closed: the test proves nothing", time.Since(start))
	}

	// Another exit 126 is the script's own, at once.
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho no\nexit 126\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	err = agent.RunScript(ctx, env, script, logFile, nil)
	if exit, ok := err.(*agent.ExitError); !ok || exit.Code != 126 {
		t.Fatalf("a script exiting 126: %v, want ExitError 126", err)
	}
}
