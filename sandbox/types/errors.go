package types

import (
	"context"
	"errors"
	"fmt"
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
// succeed if tried again later (transient failures and throttling).
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
type Error struct {
	Class     Class  // the class; Unknown when the cause was not classified
	Op        string // the operation, e.g. "create", "exec", "read file"
	Provider  string // the registry name of the provider, when known
	SandboxID string // the sandbox the operation was on, when there is one
	Err       error  // the cause; never nil
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

// IgnoreNotFound returns nil for errors of class NotFound: deleting what is
// already gone is success for teardown code.
func IgnoreNotFound(err error) error {
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}
