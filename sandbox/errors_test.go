package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/berth-sh/berth/internal/testing/fakeprovider"
	"github.com/berth-sh/berth/sandbox"
)

var allClasses = []sandbox.Class{
	sandbox.NotFound, sandbox.AlreadyExists, sandbox.InvalidArgument, sandbox.Unauthenticated,
	sandbox.ResourceExhausted, sandbox.Unavailable, sandbox.DeadlineExceeded, sandbox.NotSupported,
}

func TestErrorfMatchesExactlyOneClass(t *testing.T) {
	for _, c := range allClasses {
		err := sandbox.Errorf(c, "cause: %w", io.ErrUnexpectedEOF)
		wrapped := fmt.Errorf("outer: %w", err)
		for _, e := range []error{err, wrapped} {
			if got := sandbox.ClassOf(e); got != c {
				t.Errorf("ClassOf(%v) = %v, want %v", e, got, c)
			}
			if !errors.Is(e, io.ErrUnexpectedEOF) {
				t.Errorf("%v: the cause is no longer reachable", e)
			}
			for _, other := range allClasses {
				if is := errors.Is(e, other.Sentinel()); is != (other == c) {
					t.Errorf("errors.Is(%v error, %v) = %v", c, other, is)
				}
			}
		}
	}
}

func TestClassOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want sandbox.Class
	}{
		{nil, sandbox.Unknown},
		{errors.New("plain"), sandbox.Unknown},
		{context.DeadlineExceeded, sandbox.DeadlineExceeded},
		{fmt.Errorf("op: %w", context.DeadlineExceeded), sandbox.DeadlineExceeded},
		// A cancellation is the user stopping: not a class anyone retries.
		{context.Canceled, sandbox.Unknown},
		{sandbox.ErrNotFound, sandbox.NotFound},
		{fmt.Errorf("a: %w", fmt.Errorf("b: %w", sandbox.ErrUnavailable)), sandbox.Unavailable},
		{errors.Join(errors.New("x"), sandbox.ErrNotSupported), sandbox.NotSupported},
	} {
		if got := sandbox.ClassOf(tc.err); got != tc.want {
			t.Errorf("ClassOf(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestClassify(t *testing.T) {
	cause := errors.New("connection reset")
	err := sandbox.Classify(sandbox.Unavailable, cause)
	if sandbox.ClassOf(err) != sandbox.Unavailable || !errors.Is(err, cause) {
		t.Errorf("Classify(Unavailable, plain) = %v (class %v)", err, sandbox.ClassOf(err))
	}
	// An error that already has a class keeps it.
	nf := sandbox.Errorf(sandbox.NotFound, "gone")
	if got := sandbox.Classify(sandbox.Unavailable, nf); got != nf {
		t.Errorf("Classify re-classed %v as %v", nf, sandbox.ClassOf(got))
	}
	if sandbox.Classify(sandbox.Unavailable, nil) != nil {
		t.Error("Classify(nil) is not nil")
	}
}

func TestRetryable(t *testing.T) {
	for _, c := range append(allClasses, sandbox.Unknown) {
		want := c == sandbox.Unavailable || c == sandbox.ResourceExhausted
		if c.Retryable() != want {
			t.Errorf("%v.Retryable() = %v", c, c.Retryable())
		}
	}
}

func TestClassNames(t *testing.T) {
	if s := sandbox.NotFound.String(); s != "NotFound" {
		t.Errorf("NotFound.String() = %q", s)
	}
	if s := sandbox.Class(99).String(); s != "Class(99)" {
		t.Errorf("Class(99).String() = %q", s)
	}
	if sandbox.Unknown.Sentinel() != nil || sandbox.Class(99).Sentinel() != nil {
		t.Error("Unknown and out-of-range classes must have no sentinel")
	}
}

func TestIgnoreNotFound(t *testing.T) {
	if err := sandbox.IgnoreNotFound(fmt.Errorf("x: %w", sandbox.Errorf(sandbox.NotFound, "gone"))); err != nil {
		t.Errorf("IgnoreNotFound(NotFound) = %v", err)
	}
	other := sandbox.Errorf(sandbox.Unavailable, "down")
	if err := sandbox.IgnoreNotFound(other); err != other {
		t.Errorf("IgnoreNotFound(Unavailable) = %v", err)
	}
}

// TestUnwrapNoDuplicate: a cause that is the sentinel itself is not listed
// twice (errors.Is would still work, but Unwrap's list would lie).
func TestUnwrapNoDuplicate(t *testing.T) {
	e := &sandbox.Error{Class: sandbox.NotFound, Err: sandbox.ErrNotFound}
	if n := len(e.Unwrap()); n != 1 {
		t.Errorf("Unwrap lists %d errors, want 1", n)
	}
}

// TestWrapperAddsContext: errors from the wrappers carry op, provider and
// sandbox ID once, with the driver's class.
func TestWrapperAddsContext(t *testing.T) {
	p, _ := newFake(t, fakeprovider.Options{})
	sb := create(t, p)
	_, err := sb.ReadFile(t.Context(), "/missing")
	var e *sandbox.Error
	if !errors.As(err, &e) {
		t.Fatalf("%v is not a *sandbox.Error", err)
	}
	if e.Class != sandbox.NotFound || e.Op != "read file" || e.Provider != "fake" || e.SandboxID != sb.ID() {
		t.Errorf("error = %+v, want NotFound, read file, fake, %s", e, sb.ID())
	}
	if n := strings.Count(err.Error(), sb.ID()); n != 1 {
		t.Errorf("%q names the sandbox %d times, want once", err, n)
	}
}
