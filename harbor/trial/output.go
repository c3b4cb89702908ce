package trial

import (
	"context"

	"github.com/berth-sh/berth/internal/tailbuf"
	"github.com/berth-sh/berth/sandbox"
)

// runTail runs cmd and keeps only the last n bytes of its output (stdout
// and stderr together): what a task's command prints is the sandbox's, and
// a healthcheck that prints gigabytes must not grow the runner's memory.
func runTail(ctx context.Context, sb *sandbox.Sandbox, cmd sandbox.Command, n int) (int, []byte, error) {
	out := &tailbuf.Buffer{Max: n}
	cmd.Stdout, cmd.Stderr = out, out
	p, err := sb.Exec(ctx, cmd)
	if err != nil {
		return 0, nil, err
	}
	code, err := p.Wait(ctx)
	return code, out.Bytes(), err
}
