package envd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"connectrpc.com/connect"

	"github.com/berth-sh/berth/envd/envdproto"
	"github.com/berth-sh/berth/sandbox/errdefs"
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

// codeOf is the Connect code of err: the code of its class in the one
// mapping of sandbox/errdefs, the host's errnos classed there too
// (errdefs.ClassifyErrno). A cancellation is Canceled: the caller went away.
func codeOf(err error) connect.Code {
	err = errdefs.ClassifyErrno(err)
	if errdefs.ClassOf(err) == errdefs.Unknown && errors.Is(err, context.Canceled) {
		return connect.CodeCanceled
	}
	return connect.Code(errdefs.RPCCode(errdefs.ClassOf(err)))
}

// httpStatusOf is the status of a /files failure: the status of its class
// in the one mapping of sandbox/errdefs (a full disk, a Permanent
// ResourceExhausted, is 507). A body over the limit is 413, a caller that
// went away 499.
func httpStatusOf(err error) int {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return http.StatusRequestEntityTooLarge
	}
	err = errdefs.ClassifyErrno(err)
	if errdefs.ClassOf(err) == errdefs.Unknown && errors.Is(err, context.Canceled) {
		return 499
	}
	return errdefs.HTTPStatus(err)
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
