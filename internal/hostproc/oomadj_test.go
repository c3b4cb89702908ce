package hostproc

import (
	"os"
	"strings"
	"sync"
	"testing"
)

// Every process started with OOMScoreAdj, and what it forks at once, has
// the raised score from its first instruction; this process keeps its
// own, also while many starts run at once.
func TestOOMScoreAdj(t *testing.T) {
	own, err := os.ReadFile(selfOOMScoreAdj)
	if err != nil {
		t.Skipf("no %s: %v", selfOOMScoreAdj, err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			// The grandchild reads its score as soon as it runs: a score set
			// on the child after its start would miss it.
			ex, out, stderr := run(t, Spec{OOMScoreAdj: 700}, "cat /proc/self/oom_score_adj & wait; cat /proc/$$/oom_score_adj")
			if ex.Code != 0 {
				t.Errorf("exit %+v (%q)", ex, stderr)
			}
			if got := strings.Fields(out); len(got) != 2 || got[0] != "700" || got[1] != "700" {
				t.Errorf("scores of a command and its child: %q, want 700 twice", out)
			}
		})
	}
	wg.Wait()
	if after, _ := os.ReadFile(selfOOMScoreAdj); string(after) != string(own) {
		t.Errorf("this process's score %q became %q", own, after)
	}
	if _, out, _ := run(t, Spec{}, "cat /proc/self/oom_score_adj"); out != string(own) {
		t.Errorf("without OOMScoreAdj: %q; want this process's %q", out, own)
	}
}
