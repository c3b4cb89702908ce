package agentinit

import (
	"errors"
	"strings"

	"github.com/berth-sh/berth/sandbox/types"
)

// Exit statuses of the tar helpers, so that the provider, which sees only
// the status and stderr of the command it ran, can class the error.
const (
	exitFailed   = 1
	exitInvalid  = 3
	exitNotFound = 4
)

// ExitCode is the status a helper exits with after err.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, types.ErrInvalidArgument):
		return exitInvalid
	case errors.Is(err, types.ErrNotFound):
		return exitNotFound
	}
	return exitFailed
}

// ExitError turns a helper's exit status and stderr back into a classed
// error; status 0 is nil.
func ExitError(op string, code int, stderr string) error {
	msg := strings.TrimSpace(stderr)
	if msg == "" {
		msg = "no message"
	}
	switch code {
	case 0:
		return nil
	case exitInvalid:
		return types.Errorf(types.InvalidArgument, "%s: %s", op, msg)
	case exitNotFound:
		return types.Errorf(types.NotFound, "%s: %s", op, msg)
	case 126, 127:
		return types.Errorf(types.Unavailable, "%s: the agent binary cannot run in the sandbox (exit %d): %s", op, code, msg)
	}
	return types.Errorf(types.Unknown, "%s: exit %d: %s", op, code, msg)
}
