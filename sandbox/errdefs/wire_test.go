package errdefs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"syscall"
	"testing"
	"time"
)

var allClasses = []Class{Unknown, NotFound, AlreadyExists, InvalidArgument, Unauthenticated,
	ResourceExhausted, Unavailable, DeadlineExceeded, NotSupported}

// TestWireRoundTrip: for every class, class -> wire -> class is the
// identity on each wire. On 6f9918d there was no one mapping to test (this
// test does not compile there): the mappings were written out in six places
// that disagreed. serve answered DeadlineExceeded with 504 and the e2b
// driver read 504 as Unavailable, so a timed-out create was retried
// (providers/e2b TestClassesSurviveServe, checked there, failed), and the
// Modal driver read gRPC Internal as Unavailable where envd answered
// unclassified errors with it.
func TestWireRoundTrip(t *testing.T) {
	for _, c := range allClasses {
		err := Errorf(c, "x")
		if got := ClassOfHTTPStatus(HTTPStatus(err)); got != c {
			t.Errorf("HTTP: %v -> %d -> %v", c, HTTPStatus(err), got)
		}
		if got := ClassOf(HTTPError(HTTPStatus(err), nil, err)); got != c {
			t.Errorf("HTTPError: %v -> %v", c, got)
		}
		if got := ClassOfRPCCode(RPCCode(c)); got != c {
			t.Errorf("RPC: %v -> %d -> %v", c, RPCCode(c), got)
		}
	}
	// Permanent and the advised wait travel over HTTP too.
	perm := WithPermanent(Errorf(ResourceExhausted, "disk full"))
	back := HTTPError(HTTPStatus(perm), nil, perm)
	if HTTPStatus(perm) != http.StatusInsufficientStorage || !IsPermanent(back) || Retryable(back) {
		t.Errorf("a permanent ResourceExhausted: %d, back permanent %v", HTTPStatus(perm), IsPermanent(back))
	}
	h := http.Header{"Retry-After": {RetryAfterHeader(1500 * time.Millisecond)}}
	if d := RetryAfterOf(HTTPError(http.StatusTooManyRequests, h, errors.New("x"))); d != 2*time.Second {
		t.Errorf("Retry-After %q read back as %v, want 2s", h.Get("Retry-After"), d)
	}
}

func TestClassOfHTTPStatus(t *testing.T) {
	for status, want := range map[int]Class{
		401: Unauthenticated, 403: Unauthenticated, 404: NotFound, 410: NotFound, 409: AlreadyExists,
		400: InvalidArgument, 413: InvalidArgument, 422: InvalidArgument, 405: NotSupported, 501: NotSupported,
		408: DeadlineExceeded, 504: DeadlineExceeded, 429: ResourceExhausted, 507: ResourceExhausted,
		502: Unavailable, 503: Unavailable, 599: Unavailable, 500: Unknown, 302: Unknown,
	} {
		if got := ClassOfHTTPStatus(status); got != want {
			t.Errorf("ClassOfHTTPStatus(%d) = %v, want %v", status, got, want)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":     0,
		"2":    2 * time.Second,
		"0.25": 250 * time.Millisecond,
		"-3":   0,
		"junk": 0,
		"1e9":  maxAdvisedWait,
		now.Add(30 * time.Second).Format(http.TimeFormat): 30 * time.Second,
		now.Add(-time.Hour).Format(http.TimeFormat):       0,
	} {
		if got := ParseRetryAfter(v, now); got != want {
			t.Errorf("ParseRetryAfter(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestClassifyErrno: the one errno table. The rows where the tables it
// replaced disagreed: EACCES is Unauthenticated (hosttar and the fake
// said InvalidArgument), and ENOSPC and EDQUOT are Permanent (hosttar,
// the agent's tree route, the image unpacker and the fake said
// retryable); providers/local TestOneClassPerErrnoOnEveryRoute checks the
// routes.
func TestClassifyErrno(t *testing.T) {
	for _, tc := range []struct {
		err       error
		class     Class
		permanent bool
	}{
		{&fs.PathError{Op: "open", Path: "/x", Err: syscall.ENOENT}, NotFound, false},
		{fmt.Errorf("open: %w", fs.ErrNotExist), NotFound, false},
		{fs.ErrExist, AlreadyExists, false},
		{syscall.ENOTEMPTY, AlreadyExists, false},
		{syscall.EACCES, Unauthenticated, false},
		{syscall.EROFS, Unauthenticated, false},
		{syscall.ENOSPC, ResourceExhausted, true},
		{syscall.EDQUOT, ResourceExhausted, true},
		{syscall.EMFILE, ResourceExhausted, false},
		{syscall.EISDIR, InvalidArgument, false},
		{syscall.ETIMEDOUT, DeadlineExceeded, false},
		{syscall.ECONNRESET, Unavailable, false},
		{syscall.ENOSYS, NotSupported, false},
		{errors.New("no errno"), Unknown, false},
		// A class already given wins.
		{Classify(Unavailable, syscall.ENOENT), Unavailable, false},
	} {
		err := ClassifyErrno(tc.err)
		if ClassOf(err) != tc.class || IsPermanent(err) != tc.permanent || !errors.Is(err, tc.err) {
			t.Errorf("ClassifyErrno(%v) = %v (permanent %v), want %v (permanent %v)", tc.err, ClassOf(err), IsPermanent(err), tc.class, tc.permanent)
		}
	}
}

// TestRetryableIsClassOnly: only the class and Permanent decide; the text
// never does.
func TestRetryableIsClassOnly(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{Errorf(Unavailable, "connection reset"), true},
		{Errorf(ResourceExhausted, "slow down"), true},
		{WithPermanent(Errorf(ResourceExhausted, "Total disk limit exceeded")), false},
		{fmt.Errorf("outer: %w", WithPermanent(Errorf(Unavailable, "x"))), false},
		{errors.New("HTTP 429 Too Many Requests: rate limit exceeded"), false},
		{Errorf(DeadlineExceeded, "create timed out"), false},
		{Errorf(NotFound, "429"), false},
		{context.Canceled, false},
		{nil, false},
	} {
		if got := Retryable(tc.err); got != tc.want {
			t.Errorf("Retryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestErrorFieldsSurviveWrapping: RetryAfter and Permanent are found
// through wrapping, and the With functions keep class and text.
func TestErrorFieldsSurviveWrapping(t *testing.T) {
	base := Errorf(ResourceExhausted, "quota")
	e := WithPermanent(WithRetryAfter(base, time.Second))
	wrapped := fmt.Errorf("create: %w", &Error{Class: ClassOf(e), Op: "create", Err: e})
	if RetryAfterOf(wrapped) != time.Second || !IsPermanent(wrapped) || ClassOf(wrapped) != ResourceExhausted {
		t.Errorf("wrapped: retry after %v, permanent %v, class %v", RetryAfterOf(wrapped), IsPermanent(wrapped), ClassOf(wrapped))
	}
	if e.Error() != "quota" || base.(*Error).Permanent {
		t.Errorf("the With functions changed the text or the original: %q", e)
	}
	if WithPermanent(nil) != nil || WithRetryAfter(nil, time.Second) != nil {
		t.Error("nil did not stay nil")
	}
	plain := WithPermanent(errors.New("plain"))
	if ClassOf(plain) != Unknown || !IsPermanent(plain) {
		t.Errorf("an unclassified error marked permanent: %v %v", ClassOf(plain), IsPermanent(plain))
	}
}
