package hostproc

import (
	"os"
	"strconv"
	"strings"
	"sync"
)

// MaxOOMScoreAdj is the highest oom_score_adj: the OOM killer's first
// choice whatever its size.
const MaxOOMScoreAdj = 1000

// oomAdjMu serializes the forks that raise this process's score: between
// the raise and the restore, a fork of another caller would inherit it too
// (harmless), and a second restore could race the first's raise.
var oomAdjMu sync.Mutex

const selfOOMScoreAdj = "/proc/self/oom_score_adj"

// withOOMScoreAdj runs start (a fork) with this process's oom_score_adj
// raised to adj, then puts the old score back. The child inherits the
// score at fork, so it and every descendant have it from their first
// instruction; setting /proc/PID/oom_score_adj after the start would miss
// what the child forks first. Only a raise is done: lowering needs
// CAP_SYS_RESOURCE, and a restore to the old value never does (the kernel
// refuses only a value below the one a privileged writer set). When /proc
// cannot be written, the child starts with the server's score.
func withOOMScoreAdj(adj int, start func() error) error {
	if adj == 0 {
		return start()
	}
	oomAdjMu.Lock()
	defer oomAdjMu.Unlock()
	b, err := os.ReadFile(selfOOMScoreAdj)
	if err != nil {
		return start()
	}
	old := strings.TrimSpace(string(b))
	if cur, err := strconv.Atoi(old); err != nil || cur >= adj {
		return start()
	}
	if err := os.WriteFile(selfOOMScoreAdj, []byte(strconv.Itoa(adj)), 0); err != nil {
		return start()
	}
	defer func() { _ = os.WriteFile(selfOOMScoreAdj, []byte(old), 0) }()
	return start()
}
