package envd

import (
	"os"
	"strings"
	"testing"

	"github.com/berth-sh/berth/sandbox/driver"
)

// CommandOOMScoreAdj reaches the processes the server starts (how the
// score is raised from a child's first instruction, also for many starts
// at once, is internal/hostproc's TestOOMScoreAdj); 0 leaves them at the
// server's own.
func TestCommandOOMScoreAdj(t *testing.T) {
	own, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		t.Skipf("no oom_score_adj: %v", err)
	}
	e := unixEnv(t, ServerOptions{CommandOOMScoreAdj: 700})
	read := driver.Command{Args: []string{"cat", "/proc/self/oom_score_adj"}}
	if _, out, _, err := run(t, e.client, read); err != nil || strings.TrimSpace(out) != "700" {
		t.Errorf("with the option: %q, %v; want 700", out, err)
	}
	plain := unixEnv(t, ServerOptions{})
	if _, out, _, err := run(t, plain.client, read); err != nil || out != string(own) {
		t.Errorf("without the option: %q, %v; want the server's %q", out, err, own)
	}
}

func TestCommandOOMScoreAdjBounds(t *testing.T) {
	for _, adj := range []int{-1, -1000, MaxOOMScoreAdj + 1} {
		if _, err := NewServer(ServerOptions{CommandOOMScoreAdj: adj}); err == nil || !strings.Contains(err.Error(), "oom_score_adj") {
			t.Errorf("CommandOOMScoreAdj %d: %v, want refused", adj, err)
		}
	}
}
