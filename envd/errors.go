package envd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"syscall"

	"connectrpc.com/connect"

	"github.com/berth-sh/berth/envd/envdproto"
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

// fileStatuses is the /files status of each code. ResourceExhausted is a
// full disk (507) unless transientErrno says the shortage passes (503).
var fileStatuses = map[connect.Code]int{
	connect.CodeCanceled:           499,
	connect.CodeInvalidArgument:    http.StatusBadRequest,
	connect.CodeFailedPrecondition: http.StatusBadRequest,
	connect.CodeNotFound:           http.StatusNotFound,
	connect.CodeAlreadyExists:      http.StatusConflict,
	connect.CodePermissionDenied:   http.StatusForbidden,
	connect.CodeResourceExhausted:  http.StatusInsufficientStorage,
	connect.CodeUnavailable:        http.StatusServiceUnavailable,
	connect.CodeDeadlineExceeded:   http.StatusGatewayTimeout,
	connect.CodeUnimplemented:      http.StatusNotImplemented,
}

// httpStatusOf is the status of a /files failure.
func httpStatusOf(err error) int {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return http.StatusRequestEntityTooLarge
	}
	c := codeOf(err)
	if c == connect.CodeResourceExhausted && transientErrno(err) {
		return http.StatusServiceUnavailable
	}
	if s, ok := fileStatuses[c]; ok {
		return s
	}
	return http.StatusInternalServerError
}

var rpcErrors = connect.NewErrorWriter()

// WriteRPCError answers a Connect call that never reached a handler (no
// such sandbox, a refused token) in the protocol's own error shape: a
// unary call gets a JSON error with the code's HTTP status; a streaming
// call gets 200 and one end-of-stream envelope carrying the error, which
// is where Connect clients look for it.
func WriteRPCError(w http.ResponseWriter, r *http.Request, code connect.Code, msg string) {
	_ = rpcErrors.Write(w, r, connect.NewError(code, errors.New(msg)))
}

// WriteHTTPError writes envd's plain HTTP error body {"code","message"}.
func WriteHTTPError(w http.ResponseWriter, status int, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("Content-Disposition")
	w.Header().Del("Content-Length")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(envdproto.HTTPError{Code: status, Message: fmt.Sprintf(format, args...)})
}
