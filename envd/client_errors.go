package envd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"connectrpc.com/connect"

	"github.com/berth-sh/berth/sandbox/errdefs"
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
// unclassified (errdefs.ClassOf leaves cancellation Unknown on purpose).
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("envd %s: %w", op, err)
	}
	class := errdefs.Unknown
	var ce *connect.Error
	if errors.As(err, &ce) {
		class = errdefs.ClassOfRPCCode(uint32(ce.Code()))
		if class == errdefs.Unknown && isTransport(ce.Unwrap()) {
			class = errdefs.Unavailable
		}
	} else if errors.Is(err, context.DeadlineExceeded) {
		class = errdefs.DeadlineExceeded
	} else if isTransport(err) {
		class = errdefs.Unavailable
	}
	return errdefs.Errorf(class, "envd %s: %w", op, err)
}
