package errdefs

import (
	"errors"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// This file is the one mapping between error classes and each wire berth
// speaks: HTTP statuses (the E2B and Daytona REST APIs, envd's /files,
// berth serve), RPC codes (Connect and gRPC, which share gRPC's numbering)
// and errnos (what the host's file and process calls return). Every server
// answers with the status or code of a class from here, and every client
// reads the class back from here, so class -> status -> class is the
// identity for every class; the round trip is tested.

// httpStatuses is the status of each class. Unauthenticated is 403: a
// server that answers with a class has let the caller in and refuses this
// one operation (a missing or wrong key is the server's own 401, read back
// as Unauthenticated too).
var httpStatuses = [...]int{
	Unknown:           http.StatusInternalServerError,
	NotFound:          http.StatusNotFound,
	AlreadyExists:     http.StatusConflict,
	InvalidArgument:   http.StatusBadRequest,
	Unauthenticated:   http.StatusForbidden,
	ResourceExhausted: http.StatusTooManyRequests,
	Unavailable:       http.StatusServiceUnavailable,
	DeadlineExceeded:  http.StatusGatewayTimeout,
	NotSupported:      http.StatusNotImplemented,
}

// HTTPStatus is the status a server answers for err: the status of its
// class, except that a Permanent ResourceExhausted (a full disk, a used-up
// quota) is 507, which HTTPError reads back as Permanent.
func HTTPStatus(err error) int {
	c := ClassOf(err)
	if c == ResourceExhausted && IsPermanent(err) {
		return http.StatusInsufficientStorage
	}
	if c < 0 || int(c) >= len(httpStatuses) {
		return http.StatusInternalServerError
	}
	return httpStatuses[c]
}

// ClassOfHTTPStatus is the class of a failed HTTP answer, whoever answered
// (berth's own servers, E2B, Daytona, an image registry). Statuses that no
// class answers with are read by their meaning: 410 is gone (NotFound),
// 408 a timeout, 405 a missing method (NotSupported), other 4xx the
// caller's mistake, other 5xx a server that may recover (Unavailable).
// 500 is Unknown: a server that failed without saying why gives no reason
// to try again, and it is what berth's servers answer for an Unknown
// error, so reading it as Unavailable would retry every unclassified
// failure. A client whose transport retries a 500 itself (a registry's,
// in go-containerregistry) has done so before the status is read here.
func ClassOfHTTPStatus(status int) Class {
	switch status {
	case http.StatusNotFound, http.StatusGone:
		return NotFound
	case http.StatusConflict:
		return AlreadyExists
	case http.StatusUnauthorized, http.StatusForbidden:
		return Unauthenticated
	case http.StatusTooManyRequests, http.StatusInsufficientStorage:
		return ResourceExhausted
	case http.StatusBadGateway, http.StatusServiceUnavailable:
		return Unavailable
	case http.StatusGatewayTimeout, http.StatusRequestTimeout:
		return DeadlineExceeded
	case http.StatusNotImplemented, http.StatusMethodNotAllowed:
		return NotSupported
	case http.StatusInternalServerError:
		return Unknown
	}
	switch {
	case status >= 400 && status < 500:
		return InvalidArgument
	case status >= 500 && status < 600:
		return Unavailable
	}
	return Unknown
}

// HTTPError classes cause, the error of an answer with this status: the
// class from ClassOfHTTPStatus, the wait of the answer's Retry-After
// header (seconds or an HTTP date, capped at maxAdvisedWait), and Permanent
// for 507.
func HTTPError(status int, header http.Header, cause error) error {
	e := &Error{Class: ClassOfHTTPStatus(status), Err: cause, Permanent: status == http.StatusInsufficientStorage}
	if header != nil {
		e.RetryAfter = ParseRetryAfter(header.Get("Retry-After"), time.Now())
	}
	return e
}

// maxAdvisedWait bounds a server's advice, so that a bad header cannot park
// a caller for a day.
const maxAdvisedWait = 5 * time.Minute

// ParseRetryAfter reads a Retry-After value: seconds (a fraction allowed),
// or an HTTP date after now. Anything else, or a wait that is not
// positive, is zero; a wait over five minutes is five minutes.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 {
			d = time.Duration(min(s, maxAdvisedWait.Seconds()) * float64(time.Second))
		}
	} else if t, err := http.ParseTime(v); err == nil && t.After(now) {
		d = t.Sub(now)
	}
	return min(d, maxAdvisedWait)
}

// RetryAfterHeader is the Retry-After value a server sends for a wait d:
// whole seconds, rounded up, at least one.
func RetryAfterHeader(d time.Duration) string {
	return strconv.Itoa(max(int((d+time.Second-1)/time.Second), 1))
}

// RPC codes in gRPC's numbering, which Connect shares (connect.Code and
// grpc/codes.Code convert to and from uint32 directly). Only the codes this
// mapping names are listed.
const (
	rpcCanceled           uint32 = 1
	rpcUnknown            uint32 = 2
	rpcInvalidArgument    uint32 = 3
	rpcDeadlineExceeded   uint32 = 4
	rpcNotFound           uint32 = 5
	rpcAlreadyExists      uint32 = 6
	rpcPermissionDenied   uint32 = 7
	rpcResourceExhausted  uint32 = 8
	rpcFailedPrecondition uint32 = 9
	rpcAborted            uint32 = 10
	rpcOutOfRange         uint32 = 11
	rpcUnimplemented      uint32 = 12
	rpcInternal           uint32 = 13
	rpcUnavailable        uint32 = 14
	rpcDataLoss           uint32 = 15
	rpcUnauthenticated    uint32 = 16
)

// rpcCodes is the code of each class. Unauthenticated is PermissionDenied:
// a server that answers at all has let the caller in, and refuses this one
// operation (envd's own choice, which the SDKs read).
var rpcCodes = [...]uint32{
	Unknown:           rpcUnknown,
	NotFound:          rpcNotFound,
	AlreadyExists:     rpcAlreadyExists,
	InvalidArgument:   rpcInvalidArgument,
	Unauthenticated:   rpcPermissionDenied,
	ResourceExhausted: rpcResourceExhausted,
	Unavailable:       rpcUnavailable,
	DeadlineExceeded:  rpcDeadlineExceeded,
	NotSupported:      rpcUnimplemented,
}

// RPCCode is the Connect / gRPC code a server answers for an error of
// class c.
func RPCCode(c Class) uint32 {
	if c < 0 || int(c) >= len(rpcCodes) {
		return rpcUnknown
	}
	return rpcCodes[c]
}

// ClassOfRPCCode is the class of a Connect / gRPC error code. Canceled
// stays Unknown (the caller stopped; nobody should retry it), and so do
// Internal and DataLoss: a server fault that says nothing of recovering.
func ClassOfRPCCode(code uint32) Class {
	switch code {
	case rpcNotFound:
		return NotFound
	case rpcAlreadyExists:
		return AlreadyExists
	case rpcInvalidArgument, rpcFailedPrecondition, rpcOutOfRange:
		return InvalidArgument
	case rpcUnauthenticated, rpcPermissionDenied:
		return Unauthenticated
	case rpcResourceExhausted:
		return ResourceExhausted
	case rpcUnavailable, rpcAborted:
		return Unavailable
	case rpcDeadlineExceeded:
		return DeadlineExceeded
	case rpcUnimplemented:
		return NotSupported
	}
	return Unknown
}

// errnoClasses is the one mapping of the errnos of host file and process
// calls onto classes; every route that meets an errno (envd's file calls,
// the agent's tree upload, hosttar, the image unpacker) classes it here.
// A refused permission (EACCES, EPERM, EROFS) is Unauthenticated, not
// InvalidArgument: the path and the request are well formed, the caller
// may not write there (another user may), and it goes on the wire as 403 /
// PermissionDenied, as envd answers it. The Permanent ones are named in
// ClassifyErrno.
var errnoClasses = []struct {
	errno syscall.Errno
	class Class
}{
	{syscall.ENOENT, NotFound},
	{syscall.ESRCH, NotFound},
	{syscall.EEXIST, AlreadyExists},
	{syscall.ENOTEMPTY, AlreadyExists},
	{syscall.EACCES, Unauthenticated},
	{syscall.EPERM, Unauthenticated},
	{syscall.EROFS, Unauthenticated},
	{syscall.ENOSPC, ResourceExhausted},
	{syscall.EDQUOT, ResourceExhausted},
	{syscall.EMFILE, ResourceExhausted},
	{syscall.ENFILE, ResourceExhausted},
	{syscall.EAGAIN, ResourceExhausted},
	{syscall.ENOMEM, ResourceExhausted},
	{syscall.ENOTDIR, InvalidArgument},
	{syscall.EISDIR, InvalidArgument},
	{syscall.EINVAL, InvalidArgument},
	{syscall.ELOOP, InvalidArgument},
	{syscall.ENAMETOOLONG, InvalidArgument},
	{syscall.EXDEV, InvalidArgument},
	{syscall.ENOEXEC, InvalidArgument},
	{syscall.E2BIG, InvalidArgument},
	{syscall.EFBIG, InvalidArgument},
	{syscall.ETIMEDOUT, DeadlineExceeded},
	{syscall.ECONNREFUSED, Unavailable},
	{syscall.ECONNRESET, Unavailable},
	{syscall.EPIPE, Unavailable},
	{syscall.ENOSYS, NotSupported},
	{syscall.EOPNOTSUPP, NotSupported},
}

// ClassifyErrno classes err by the errno in its tree (fs.ErrNotExist and
// the like are errnos underneath). A full disk or quota (ENOSPC, EDQUOT)
// is a Permanent ResourceExhausted: the space is held by what the sandbox
// itself wrote, so waiting does not free it and a retry (a gate's eight)
// would only fill it again; on the wire it is 507, read back as Permanent.
// A shortage that passes (EMFILE, EAGAIN, ENOMEM) is a retryable one. An
// err that already has a class, or holds no errno of the table, is
// returned as it is.
func ClassifyErrno(err error) error {
	if err == nil || ClassOf(err) != Unknown {
		return err
	}
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		// The io/fs sentinels without an errno beneath them.
		switch {
		case errors.Is(err, fs.ErrNotExist):
			errno = syscall.ENOENT
		case errors.Is(err, fs.ErrExist):
			errno = syscall.EEXIST
		case errors.Is(err, fs.ErrPermission):
			errno = syscall.EPERM
		default:
			return err
		}
	}
	for _, m := range errnoClasses {
		if m.errno == errno {
			return &Error{Class: m.class, Err: err, Permanent: errno == syscall.ENOSPC || errno == syscall.EDQUOT}
		}
	}
	return err
}
