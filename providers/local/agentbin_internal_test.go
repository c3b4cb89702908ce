package local

import (
	"os"
	"path/filepath"
	"testing"
)

// With no agent binary set, berth-agent beside the running binary is the
// agent, and the running binary itself when there is none (or it is not
// an executable file).
func TestDefaultAgent(t *testing.T) {
	dir := t.TempDir()
	berth := filepath.Join(dir, "berth")
	sibling := filepath.Join(dir, AgentName)
	if got := defaultAgent(berth); got != berth {
		t.Errorf("no sibling: %s, want %s", got, berth)
	}
	if err := os.WriteFile(sibling, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := defaultAgent(berth); got != berth {
		t.Errorf("a sibling that is not executable: %s, want %s", got, berth)
	}
	if err := os.Chmod(sibling, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := defaultAgent(berth); got != sibling {
		t.Errorf("with a sibling: %s, want %s", got, sibling)
	}
	if got := defaultAgent(sibling); got != sibling {
		t.Errorf("berth-agent itself: %s", got)
	}
	if err := os.Remove(sibling); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(sibling, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := defaultAgent(berth); got != berth {
		t.Errorf("a directory named berth-agent: %s, want %s", got, berth)
	}
}
