package k8s

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/berth-sh/berth/sandbox/throttle"
	"github.com/berth-sh/berth/sandbox/types"
)

// classify maps an API error onto berth's classes, keeping it as the cause.
// A quota refusal (403 "exceeded quota") is ResourceExhausted and marked
// permanent: waiting does not free quota that the job itself holds.
func classify(err error, what string) error {
	if err == nil {
		return nil
	}
	var c types.Class
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		c = types.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		c = types.Unknown
	case apierrors.IsNotFound(err):
		c = types.NotFound
	case apierrors.IsAlreadyExists(err), apierrors.IsConflict(err):
		c = types.AlreadyExists
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsRequestEntityTooLargeError(err):
		c = types.InvalidArgument
	case apierrors.IsUnauthorized(err):
		c = types.Unauthenticated
	case apierrors.IsForbidden(err) && isQuota(err):
		return throttle.Permanent(types.Errorf(types.ResourceExhausted, "k8s: %s: %w", what, err))
	case apierrors.IsForbidden(err):
		// RBAC: the credential works but lacks the verb. Not retryable.
		c = types.Unauthenticated
	case apierrors.IsTooManyRequests(err):
		c = types.ResourceExhausted
	case apierrors.IsServerTimeout(err), apierrors.IsTimeout(err), apierrors.IsServiceUnavailable(err),
		apierrors.IsInternalError(err), apierrors.IsUnexpectedServerError(err):
		c = types.Unavailable
	case isNet(err):
		c = types.Unavailable
	default:
		c = types.Unknown
	}
	return types.Classify(c, fmt.Errorf("k8s: %s: %w", what, err))
}

func isQuota(err error) bool {
	var s apierrors.APIStatus
	if errors.As(err, &s) {
		m := s.Status().Message
		m = strings.ToLower(m)
		return strings.Contains(m, "exceeded quota")
	}
	return false
}

func isNet(err error) bool {
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &ne) || errors.As(err, &oe)
}
