package envd

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"syscall"

	"connectrpc.com/connect"

	"github.com/berth-sh/berth/sandbox/types"
)

// rpcError turns a backend's error into a Connect error whose code the
// client maps back to a class. The message keeps the cause's text (it names
// the path, never a token).
func rpcError(err error) *connect.Error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	return connect.NewError(codeOf(err), err)
}

// classCodes is the Connect code of each class. Unauthenticated becomes
// PermissionDenied: the caller was let in; this one operation is refused.
var classCodes = [...]connect.Code{
	types.NotFound:          connect.CodeNotFound,
	types.AlreadyExists:     connect.CodeAlreadyExists,
	types.InvalidArgument:   connect.CodeInvalidArgument,
	types.Unauthenticated:   connect.CodePermissionDenied,
	types.ResourceExhausted: connect.CodeResourceExhausted,
	types.Unavailable:       connect.CodeUnavailable,
	types.DeadlineExceeded:  connect.CodeDeadlineExceeded,
	types.NotSupported:      connect.CodeUnimplemented,
}

// codeOf maps an error by its class (what the sandbox API returns), else by
// its errno (what the host returns).
func codeOf(err error) connect.Code {
	if c := types.ClassOf(err); c > types.Unknown && int(c) < len(classCodes) {
		return classCodes[c]
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return connect.CodeNotFound
	case errors.Is(err, fs.ErrExist), errors.Is(err, syscall.ENOTEMPTY):
		return connect.CodeAlreadyExists
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EROFS):
		return connect.CodePermissionDenied
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT), transientErrno(err):
		return connect.CodeResourceExhausted
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.EINVAL),
		errors.Is(err, syscall.ELOOP), errors.Is(err, syscall.ENAMETOOLONG), errors.Is(err, syscall.EXDEV),
		errors.Is(err, syscall.ENOEXEC):
		return connect.CodeInvalidArgument
	case errors.Is(err, context.Canceled):
		return connect.CodeCanceled
	}
	return connect.CodeInternal
}

// transientErrno is a shortage that passes (descriptors, memory): worth a
// retry, unlike a full disk.
func transientErrno(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.ENOMEM)
}

// httpStatusOf is the status of a /files failure.
func httpStatusOf(err error) int {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return http.StatusRequestEntityTooLarge
	}
	switch c := codeOf(err); c {
	case connect.CodeResourceExhausted:
		if transientErrno(err) {
			return http.StatusServiceUnavailable
		}
		return http.StatusInsufficientStorage
	case connect.CodeDeadlineExceeded:
		return http.StatusGatewayTimeout
	default:
		return httpStatusOfCode(c)
	}
}

// httpStatusOfCode is the Connect protocol's code -> HTTP status table.
func httpStatusOfCode(c connect.Code) int {
	switch c {
	case connect.CodeCanceled:
		return 499
	case connect.CodeInvalidArgument, connect.CodeOutOfRange, connect.CodeFailedPrecondition:
		return http.StatusBadRequest
	case connect.CodeDeadlineExceeded:
		return http.StatusGatewayTimeout
	case connect.CodeNotFound:
		return http.StatusNotFound
	case connect.CodeAlreadyExists, connect.CodeAborted:
		return http.StatusConflict
	case connect.CodePermissionDenied:
		return http.StatusForbidden
	case connect.CodeResourceExhausted:
		return http.StatusTooManyRequests
	case connect.CodeUnimplemented:
		return http.StatusNotImplemented
	case connect.CodeUnavailable:
		return http.StatusServiceUnavailable
	case connect.CodeUnauthenticated:
		return http.StatusUnauthorized
	}
	return http.StatusInternalServerError
}

// WriteRPCError answers a Connect call that never reached a handler (no
// such sandbox, a refused token) in the protocol's own error shape: a
// unary call gets a JSON error with the code's HTTP status; a streaming
// call gets 200 and one end-of-stream envelope carrying the error, which
// is where Connect clients look for it.
func WriteRPCError(w http.ResponseWriter, r *http.Request, code connect.Code, msg string) {
	body := map[string]any{"code": code.String(), "message": msg}
	if r.Header.Get("Content-Type") == "application/connect+json" {
		end, _ := json.Marshal(map[string]any{"error": body})
		w.Header().Set("Content-Type", "application/connect+json")
		w.WriteHeader(http.StatusOK)
		frame := make([]byte, 5, 5+len(end))
		frame[0] = 0x02
		binary.BigEndian.PutUint32(frame[1:5], uint32(len(end)))
		_, _ = w.Write(append(frame, end...))
		return
	}
	b, _ := json.Marshal(body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(httpStatusOfCode(code))
	_, _ = w.Write(b)
}

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
