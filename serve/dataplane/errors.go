package dataplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"connectrpc.com/connect"

	"github.com/berth-sh/berth/envd/envdproto"
	"github.com/berth-sh/berth/sandbox"
)

// codeOf maps an error class onto the Connect code the SDKs read:
// NotFound -> FileNotFound / false, AlreadyExists -> makeDir false.
func codeOf(err error) connect.Code {
	switch sandbox.ClassOf(err) {
	case sandbox.NotFound:
		return connect.CodeNotFound
	case sandbox.AlreadyExists:
		return connect.CodeAlreadyExists
	case sandbox.InvalidArgument:
		return connect.CodeInvalidArgument
	case sandbox.Unauthenticated:
		return connect.CodePermissionDenied
	case sandbox.ResourceExhausted:
		return connect.CodeResourceExhausted
	case sandbox.Unavailable:
		return connect.CodeUnavailable
	case sandbox.DeadlineExceeded:
		return connect.CodeDeadlineExceeded
	case sandbox.NotSupported:
		return connect.CodeUnimplemented
	}
	if errors.Is(err, context.Canceled) {
		return connect.CodeCanceled
	}
	return connect.CodeInternal
}

// rpcError turns a sandbox error into a Connect error, keeping a Connect
// error as it is.
func rpcError(err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	return connect.NewError(codeOf(err), err)
}

// StatusOf is the HTTP status of a failed /files call.
func StatusOf(err error) int {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return http.StatusRequestEntityTooLarge
	}
	switch sandbox.ClassOf(err) {
	case sandbox.NotFound:
		return http.StatusNotFound
	case sandbox.AlreadyExists:
		return http.StatusConflict
	case sandbox.InvalidArgument:
		return http.StatusBadRequest
	case sandbox.Unauthenticated:
		return http.StatusForbidden
	case sandbox.ResourceExhausted:
		return http.StatusInsufficientStorage
	case sandbox.Unavailable:
		return http.StatusServiceUnavailable
	case sandbox.DeadlineExceeded:
		return http.StatusGatewayTimeout
	case sandbox.NotSupported:
		return http.StatusNotImplemented
	}
	return http.StatusInternalServerError
}

// WriteHTTPError writes envd's plain HTTP error body {"code","message"}.
func WriteHTTPError(w http.ResponseWriter, status int, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("Content-Disposition")
	w.Header().Del("Content-Length")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(envdproto.HTTPError{Code: status, Message: fmt.Sprintf(format, args...)})
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
		n := uint32(len(end))
		frame[1], frame[2], frame[3], frame[4] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
		_, _ = w.Write(append(frame, end...))
		return
	}
	b, _ := json.Marshal(body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(httpStatusOfCode(code))
	_, _ = w.Write(b)
}

// httpStatusOfCode is the Connect protocol's code -> HTTP status table.
func httpStatusOfCode(c connect.Code) int {
	switch c {
	case connect.CodeCanceled:
		return 499
	case connect.CodeInvalidArgument, connect.CodeOutOfRange:
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
	case connect.CodeFailedPrecondition:
		return http.StatusBadRequest
	case connect.CodeUnimplemented:
		return http.StatusNotImplemented
	case connect.CodeUnavailable:
		return http.StatusServiceUnavailable
	case connect.CodeUnauthenticated:
		return http.StatusUnauthorized
	}
	return http.StatusInternalServerError
}
