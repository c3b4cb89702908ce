package shellserve

import (
	"context"
	"path"
	"sync"

	"github.com/berth-sh/berth/sandbox"
)

// Target is where commands run: a sandbox and the working directory that
// relative paths and commands start in ("" is the sandbox's own).
type Target struct {
	Sandbox *sandbox.Sandbox
	Dir     string
}

// TargetFunc finds the target at the time of a call; an error (no task
// started, say) is shown to the agent.
type TargetFunc func(ctx context.Context) (Target, error)

// bashOrSh runs script with bash where the image has it, else sh.
func bashOrSh(script string) []string {
	return []string{"sh", "-c", `if command -v bash >/dev/null 2>&1; then exec bash -c "$1"; fi; exec sh -c "$1"`, "sh", script}
}

// interactive is a shell reading commands from stdin.
func interactive() []string {
	return []string{"sh", "-c", `if command -v bash >/dev/null 2>&1; then exec bash; fi; exec sh`}
}

// abs resolves p against the target's working directory.
func (t Target) abs(p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	dir := t.Dir
	if dir == "" {
		dir = "/"
	}
	return path.Join(dir, p)
}

// tail keeps the last max bytes written to it, safe for the two output
// streams of one command.
type tail struct {
	mu      sync.Mutex
	max     int
	buf     []byte
	dropped int64
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.max; over > 0 {
		t.dropped += int64(over)
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

func (t *tail) String() (string, int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf), t.dropped
}
