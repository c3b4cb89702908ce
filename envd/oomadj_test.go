package envd

import (
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/berth-sh/berth/sandbox/types"
)

// Every process the server starts, and what it forks at once, has the
// raised score from its first instruction; the server keeps its own, also
// while many starts run at once.
func TestCommandOOMScoreAdj(t *testing.T) {
	own, err := os.ReadFile(selfOOMScoreAdj)
	if err != nil {
		t.Skipf("no %s: %v", selfOOMScoreAdj, err)
	}
	e := unixEnv(t, ServerOptions{CommandOOMScoreAdj: 700})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The grandchild reads its score as soon as it runs: a score set
			// on the child after its start would miss it.
			code, out, stderr, err := run(t, e.client, types.Command{Args: []string{"sh", "-c", "cat /proc/self/oom_score_adj & wait; cat /proc/$$/oom_score_adj"}})
			if err != nil || code != 0 {
				t.Errorf("exit %d, %v (%q)", code, err, stderr)
				return
			}
			if got := strings.Fields(out); len(got) != 2 || got[0] != "700" || got[1] != "700" {
				t.Errorf("scores of a command and its child: %q, want 700 twice", out)
			}
		}()
	}
	wg.Wait()
	if after, _ := os.ReadFile(selfOOMScoreAdj); string(after) != string(own) {
		t.Errorf("the server's own score %q became %q", own, after)
	}

	// 0 leaves children at the server's score.
	plain := unixEnv(t, ServerOptions{})
	if _, out, _, err := run(t, plain.client, types.Command{Args: []string{"cat", "/proc/self/oom_score_adj"}}); err != nil || out != string(own) {
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
