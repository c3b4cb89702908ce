package k8s

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// classify maps an API error onto berth's classes, keeping it as the cause.
// An API status is read through the one HTTP mapping (errdefs.ClassOfHTTPStatus)
// with the server's advised delay, except two reasons its code hides: a
// quota refusal (403 "exceeded quota") is ResourceExhausted and permanent,
// since waiting does not free quota that the job itself holds; and a server
// timeout (500 ServerTimeout) is Unavailable, worth another try.
func classify(err error, what string) error {
	if err == nil {
		return nil
	}
	wrapped := fmt.Errorf("k8s: %s: %w", what, err)
	var st apierrors.APIStatus
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return errdefs.Classify(errdefs.DeadlineExceeded, wrapped)
	case errors.Is(err, context.Canceled):
		return wrapped
	case apierrors.IsForbidden(err) && isQuota(err):
		return errdefs.WithPermanent(errdefs.Errorf(errdefs.ResourceExhausted, "%w", wrapped))
	case apierrors.IsServerTimeout(err):
		return errdefs.Classify(errdefs.Unavailable, wrapped)
	case errors.As(err, &st) && st.Status().Code != 0:
		e := errdefs.Classify(errdefs.ClassOfHTTPStatus(int(st.Status().Code)), wrapped)
		if d, ok := apierrors.SuggestsClientDelay(err); ok && d > 0 {
			e = errdefs.WithRetryAfter(e, time.Duration(d)*time.Second)
		}
		return e
	case isNet(err):
		return errdefs.Classify(errdefs.Unavailable, wrapped)
	}
	return wrapped
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
