package selfdriver_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth/agent/selfdriver"
	"github.com/berth-sh/berth/internal/syncbuf"
	"github.com/berth-sh/berth/sandbox"
)

// A handle runs commands on this machine in the Spec's working directory
// with its environment, touches this machine's files, and its Delete ends
// what it started (a whole process group) and nothing else.
func TestHere(t *testing.T) {
	p, err := selfdriver.New()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := t.Context()
	dir := t.TempDir()
	sb, err := p.Create(ctx, sandbox.Spec{Image: "ignored:1", WorkDir: dir, Env: map[string]string{"HERE_MARK": "m1"}, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	r, err := sb.Run(ctx, sandbox.Command{Args: []string{"sh", "-c", `echo "$HERE_MARK $(pwd)" > out; cat out`}})
	if err != nil || r.ExitCode != 0 || strings.TrimSpace(string(r.Stdout)) != "m1 "+dir {
		t.Fatalf("run: %+v %v", r, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "out")); err != nil || strings.TrimSpace(string(b)) != "m1 "+dir {
		t.Fatalf("the file on this machine: %q %v", b, err)
	}
	if err := sb.WriteFile(ctx, filepath.Join(dir, "w"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "w")); string(b) != "x" {
		t.Fatalf("WriteFile wrote %q", b)
	}
	// A command with a child of its own, both running.
	var out syncbuf.Buffer
	proc, err := sb.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", "sleep 300 & echo $!; wait"}, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	var child int
	deadline := time.Now().Add(10 * time.Second)
	for child == 0 && time.Now().Before(deadline) {
		child, _ = strconv.Atoi(strings.TrimSpace(out.String()))
		time.Sleep(20 * time.Millisecond)
	}
	if child == 0 || syscall.Kill(child, 0) != nil {
		t.Fatalf("no child running: %q", out.String())
	}
	other, err := p.Create(ctx, sandbox.Spec{Image: "ignored:1", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	survivor, err := other.Exec(ctx, sandbox.Command{Args: []string{"sleep", "300"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if code, err := proc.Wait(wctx); err != nil || code != 128+9 {
		t.Fatalf("the command after Delete: %d %v", code, err)
	}
	for syscall.Kill(child, 0) == nil {
		if wctx.Err() != nil {
			t.Fatal("the command's child outlived Delete")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := p.Connect(ctx, sb.ID()); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("connect after delete: %v", err)
	}
	// The other handle's command was not touched.
	if err := syscall.Kill(survivor.PID(), 0); err != nil {
		t.Fatalf("another handle's command ended with the first's Delete: %v", err)
	}
	if err := other.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if code, err := survivor.Wait(wctx); err != nil || code != 128+9 {
		t.Fatalf("the other command after its Delete: %d %v", code, err)
	}
}
