package errdefs

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The closed set of error classes. Drivers wrap their native errors so that
// errors.Is(err, ErrX) holds for exactly one class; retry, quota and reaping
// decisions are made on the class, never on message text.
var (
	ErrNotFound          = errors.New("not found")
	ErrAlreadyExists     = errors.New("already exists")
	ErrInvalidArgument   = errors.New("invalid argument")
	ErrUnauthenticated   = errors.New("unauthenticated")
	ErrResourceExhausted = errors.New("resource exhausted")
	ErrUnavailable       = errors.New("unavailable")
	ErrDeadlineExceeded  = errors.New("deadline exceeded")
	ErrNotSupported      = errors.New("not supported")
)

// Class names one error class. The zero value, Unknown, is for errors no
// driver classified.
type Class int

// The classes, in the order of the sentinels above.
const (
	Unknown Class = iota
	NotFound
	AlreadyExists
	InvalidArgument
	Unauthenticated
	ResourceExhausted
	Unavailable
	DeadlineExceeded
	NotSupported
)

var classSentinels = [...]error{
	Unknown:           nil,
	NotFound:          ErrNotFound,
	AlreadyExists:     ErrAlreadyExists,
	InvalidArgument:   ErrInvalidArgument,
	Unauthenticated:   ErrUnauthenticated,
	ResourceExhausted: ErrResourceExhausted,
	Unavailable:       ErrUnavailable,
	DeadlineExceeded:  ErrDeadlineExceeded,
	NotSupported:      ErrNotSupported,
}

var classNames = [...]string{
	Unknown:           "Unknown",
	NotFound:          "NotFound",
	AlreadyExists:     "AlreadyExists",
	InvalidArgument:   "InvalidArgument",
	Unauthenticated:   "Unauthenticated",
	ResourceExhausted: "ResourceExhausted",
	Unavailable:       "Unavailable",
	DeadlineExceeded:  "DeadlineExceeded",
	NotSupported:      "NotSupported",
}

func (c Class) String() string {
	if c < 0 || int(c) >= len(classNames) {
		return fmt.Sprintf("Class(%d)", int(c))
	}
	return classNames[c]
}

// Sentinel returns the sentinel error of c, or nil for Unknown.
func (c Class) Sentinel() error {
	if c <= Unknown || int(c) >= len(classSentinels) {
		return nil
	}
	return classSentinels[c]
}

// Retryable reports whether an operation that failed with this class may
// succeed if tried again later (transient failures and throttling). An
// error can still be Permanent within a retryable class: use the function
// Retryable on errors.
func (c Class) Retryable() bool { return c == Unavailable || c == ResourceExhausted }

// ClassOf returns the class of err. A context deadline counts as
// DeadlineExceeded; a plain cancellation stays Unknown so that callers do not
// retry work the user stopped.
func ClassOf(err error) Class {
	if err == nil {
		return Unknown
	}
	for c := NotFound; int(c) < len(classSentinels); c++ {
		if errors.Is(err, classSentinels[c]) {
			return c
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return DeadlineExceeded
	}
	return Unknown
}

// Error is the error type drivers and the wrappers return. It keeps the
// cause (Err) and the class apart, so errors.Is matches both.
//
// RetryAfter and Permanent are what a retry loop needs besides the class:
// the wait the provider advised, and whether waiting can help at all.
// They are read through the error tree by RetryAfterOf and IsPermanent, so
// wrapping an *Error in another keeps them.
type Error struct {
	Class     Class  // the class; Unknown when the cause was not classified
	Op        string // the operation, e.g. "create", "exec", "read file"
	Provider  string // the registry name of the provider, when known
	SandboxID string // the sandbox the operation was on, when there is one
	Err       error  // the cause; never nil
	// RetryAfter is the wait the provider advised before another try (an
	// HTTP Retry-After, an RPC retry policy); zero when it advised none.
	RetryAfter time.Duration
	// Permanent marks a failure that waiting does not cure although its
	// class is retryable: a used-up quota, a full disk.
	Permanent bool
}

func (e *Error) Error() string {
	msg := e.Op
	if e.Provider != "" {
		msg = e.Provider + " " + msg
	}
	if e.SandboxID != "" {
		msg += " " + e.SandboxID
	}
	if e.Err != nil {
		if msg != "" {
			msg += ": "
		}
		msg += e.Err.Error() // an error without an operation reads as its cause alone
	}
	return msg
}

// Unwrap exposes both the class sentinel and the cause.
func (e *Error) Unwrap() []error {
	if s := e.Class.Sentinel(); s != nil && !errors.Is(e.Err, s) {
		return []error{s, e.Err}
	}
	return []error{e.Err}
}

// Errorf returns an *Error of class c whose cause is fmt.Errorf(format, args...).
// Use %w in format to keep a native cause reachable.
func Errorf(c Class, format string, args ...any) error {
	return &Error{Class: c, Err: fmt.Errorf(format, args...)}
}

// Classify wraps err with class c unless it already has a class.
func Classify(c Class, err error) error {
	if err == nil || ClassOf(err) != Unknown {
		return err
	}
	return &Error{Class: c, Err: err}
}

// WithRetryAfter returns err carrying the provider's advised wait d; its
// class and text are unchanged. A nil err stays nil.
func WithRetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	e := top(err)
	e.RetryAfter = d
	return e
}

// WithPermanent returns err marked as not worth retrying whatever its
// class; its class and text are unchanged. A nil err stays nil.
func WithPermanent(err error) error {
	if err == nil {
		return nil
	}
	e := top(err)
	e.Permanent = true
	return e
}

// top returns a copy of err when it is an *Error, or a new *Error of err's
// class around it, for the With functions to set a field on.
func top(err error) *Error {
	if e, ok := err.(*Error); ok {
		c := *e
		return &c
	}
	return &Error{Class: ClassOf(err), Err: err}
}

// RetryAfterOf returns the wait advised by the first *Error in err's tree
// that carries one, or zero.
func RetryAfterOf(err error) time.Duration {
	var d time.Duration
	walk(err, func(e *Error) bool {
		d = e.RetryAfter
		return d > 0
	})
	return d
}

// IsPermanent reports whether any *Error in err's tree is Permanent.
func IsPermanent(err error) bool {
	found := false
	walk(err, func(e *Error) bool {
		found = e.Permanent
		return found
	})
	return found
}

// Retryable reports whether an operation that failed with err may succeed
// if tried again: its class is retryable and it is not Permanent. It looks
// at nothing else, least of all the error's text: a message that reads
// "rate limit exceeded" (an agent's own output, say) is not a throttle.
func Retryable(err error) bool {
	return err != nil && ClassOf(err).Retryable() && !IsPermanent(err)
}

// walk calls f on every *Error in err's tree, depth first, until f
// returns true.
func walk(err error, f func(*Error) bool) bool {
	if err == nil {
		return false
	}
	if e, ok := err.(*Error); ok && f(e) {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return walk(u.Unwrap(), f)
	case interface{ Unwrap() []error }:
		for _, c := range u.Unwrap() {
			if walk(c, f) {
				return true
			}
		}
	}
	return false
}

// IgnoreNotFound returns nil for errors of class NotFound: deleting what is
// already gone is success for teardown code.
func IgnoreNotFound(err error) error {
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}
