package trial

import (
	"context"
	"sync"

	"github.com/berth-sh/berth/sandbox"
)

// runTail runs cmd and keeps only the last n bytes of its output (stdout
// and stderr together): what a task's command prints is the sandbox's, and
// a healthcheck that prints gigabytes must not grow the runner's memory.
func runTail(ctx context.Context, sb *sandbox.Sandbox, cmd sandbox.Command, n int) (int, []byte, error) {
	out := &tailWriter{max: n}
	cmd.Stdout, cmd.Stderr = out, out
	p, err := sb.Exec(ctx, cmd)
	if err != nil {
		return 0, nil, err
	}
	code, err := p.Wait(ctx)
	return code, out.bytes(), err
}

// tailWriter keeps the last max bytes written to it, from any goroutine.
type tailWriter struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(p) >= t.max {
		t.b = append(t.b[:0], p[len(p)-t.max:]...)
		return len(p), nil
	}
	t.b = append(t.b, p...)
	if len(t.b) > 2*t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailWriter) bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.b) > t.max {
		return append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return append([]byte(nil), t.b...)
}
