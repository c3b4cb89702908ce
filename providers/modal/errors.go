package modal

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	sdk "github.com/modal-labs/modal-client/go"
	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// classify maps an error of the SDK onto a class of sandbox/errdefs, keeping it
// as the cause. The SDK's own error types hold only a string and do not
// unwrap, so they are matched by type; everything else it returns is a gRPC
// status. Context errors pass through: ClassOf already reads a deadline, and
// a cancellation must stay unclassified so nobody retries it.
func classify(err error) error {
	if err == nil || errdefs.ClassOf(err) != errdefs.Unknown || errors.Is(err, context.Canceled) {
		return err
	}
	switch c := sdkClass(err); {
	case c == errdefs.ResourceExhausted:
		return exhausted(err)
	case c != errdefs.Unknown:
		return errdefs.Classify(c, err)
	}
	if st, ok := status.FromError(err); ok {
		if st.Code() == codes.ResourceExhausted {
			return exhausted(err)
		}
		if c := errdefs.ClassOfRPCCode(uint32(st.Code())); c != errdefs.Unknown {
			return errdefs.Classify(c, err)
		}
	}
	return err
}

// sdkClass is the class of one of the SDK's error types, or Unknown.
func sdkClass(err error) errdefs.Class {
	switch {
	case as[sdk.NotFoundError](err), as[sdk.SandboxFilesystemNotFoundError](err),
		// A sandbox that has ended, for an operation that needs it running.
		as[sdk.ConflictError](err):
		return errdefs.NotFound
	case as[sdk.AlreadyExistsError](err), as[sdk.SandboxFilesystemPathAlreadyExistsError](err):
		return errdefs.AlreadyExists
	case as[sdk.InvalidError](err), as[sdk.SandboxFilesystemIsADirectoryError](err),
		as[sdk.SandboxFilesystemNotADirectoryError](err), as[sdk.SandboxFilesystemDirectoryNotEmptyError](err),
		as[sdk.SandboxFilesystemFileTooLargeError](err), as[sdk.SandboxFilesystemPermissionError](err),
		// A handle used after Detach: the caller's mistake.
		as[sdk.ClientClosedError](err):
		return errdefs.InvalidArgument
	case as[sdk.ResourceExhaustedError](err):
		return errdefs.ResourceExhausted
	case as[sdk.ExecTimeoutError](err), as[sdk.SandboxTimeoutError](err), as[sdk.TimeoutError](err):
		return errdefs.DeadlineExceeded
	case as[sdk.InternalFailure](err):
		return errdefs.Unavailable
	}
	return errdefs.Unknown
}

func as[T error](err error) bool {
	var t T
	return errors.As(err, &t)
}

// exhausted tells a throttle from a quota. Modal attaches an RPCRetryPolicy
// to throttles; the SDK waits those out up to MaxThrottleWait and returns
// the status when waiting longer would pass that bound, so its advised wait
// goes to the caller through RetryAfter. Without a policy the workspace has
// used up a quota, which waiting does not free: the error is marked
// permanent and keeps the server's text, which names the quota. The SDK's
// "insufficient capacity" (nothing scheduled it in time) may free up, so it
// stays retryable.
func exhausted(err error) error {
	if after, ok := retryAfter(err); ok {
		return &errdefs.Error{Class: errdefs.ResourceExhausted, Err: fmt.Errorf("throttled, retry after %v: %w", after, err), RetryAfter: after}
	}
	if as[sdk.ResourceExhaustedError](err) {
		return errdefs.Classify(errdefs.ResourceExhausted, err)
	}
	return errdefs.WithPermanent(errdefs.Errorf(errdefs.ResourceExhausted, "quota reached (waiting will not free it): %w", err))
}

// retryAfter reads Modal's retry hint from a status's details.
func retryAfter(err error) (time.Duration, bool) {
	st, ok := status.FromError(err)
	if !ok {
		return 0, false
	}
	for _, d := range st.Details() {
		if p, ok := d.(*pb.RPCRetryPolicy); ok {
			// A float32 of seconds: round off its noise to milliseconds.
			return time.Duration(math.Round(float64(p.GetRetryAfterSecs())*1000)) * time.Millisecond, true
		}
	}
	return 0, false
}

// redacted is a cause whose text must not be shown (it may quote a config
// file, which can hold the token): it prints msg and unwraps to the cause.
type redacted struct {
	msg   string
	cause error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.cause }
