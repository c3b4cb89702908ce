package envd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"

	"connectrpc.com/connect"

	"github.com/berth-sh/berth/sandbox/types"
)

// classOfCode maps a Connect code onto berth's error classes. PermissionDenied
// joins Unauthenticated: both say "this caller may not", and neither is
// worth a retry.
func classOfCode(c connect.Code) types.Class {
	switch c {
	case connect.CodeNotFound:
		return types.NotFound
	case connect.CodeAlreadyExists:
		return types.AlreadyExists
	case connect.CodeInvalidArgument, connect.CodeFailedPrecondition, connect.CodeOutOfRange:
		return types.InvalidArgument
	case connect.CodeUnauthenticated, connect.CodePermissionDenied:
		return types.Unauthenticated
	case connect.CodeResourceExhausted:
		return types.ResourceExhausted
	case connect.CodeUnavailable, connect.CodeAborted:
		return types.Unavailable
	case connect.CodeDeadlineExceeded:
		return types.DeadlineExceeded
	case connect.CodeUnimplemented:
		return types.NotSupported
	}
	return types.Unknown
}

// classOfStatus maps a /files HTTP status onto a class.
func classOfStatus(status int) types.Class {
	switch status {
	case http.StatusNotFound:
		return types.NotFound
	case http.StatusConflict:
		return types.AlreadyExists
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return types.InvalidArgument
	case http.StatusUnauthorized, http.StatusForbidden:
		return types.Unauthenticated
	case http.StatusTooManyRequests, http.StatusInsufficientStorage:
		return types.ResourceExhausted
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return types.Unavailable
	case http.StatusMethodNotAllowed, http.StatusNotImplemented:
		return types.NotSupported
	}
	return types.Unknown
}

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
		class = classOfCode(ce.Code())
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
