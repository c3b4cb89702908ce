package envd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"connectrpc.com/connect"

	"github.com/berth-sh/berth/sandbox/types"
)

// isTransport reports whether err is a broken or refused connection rather
// than an answer of the server.
func isTransport(err error) bool {
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &ne) || errors.As(err, &oe) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE)
}

// classify wraps a client-side error with its class. A cancelled ctx stays
// unclassified (types.ClassOf leaves cancellation Unknown on purpose).
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("envd %s: %w", op, err)
	}
	class := types.Unknown
	var ce *connect.Error
	if errors.As(err, &ce) {
		class = types.ClassOfRPCCode(uint32(ce.Code()))
		if class == types.Unknown && isTransport(ce.Unwrap()) {
			class = types.Unavailable
		}
	} else if errors.Is(err, context.DeadlineExceeded) {
		class = types.DeadlineExceeded
	} else if isTransport(err) {
		class = types.Unavailable
	}
	return types.Errorf(class, "envd %s: %w", op, err)
}
