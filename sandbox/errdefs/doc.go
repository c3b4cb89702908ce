// Package errdefs is berth's closed set of error classes (NotFound,
// AlreadyExists, InvalidArgument, Unauthenticated, ResourceExhausted,
// Unavailable, DeadlineExceeded, NotSupported), the Error that carries a
// class with its cause, a Retry-After and whether it is Permanent, and the
// one mapping between the classes and each wire berth speaks: HTTP statuses
// (wire.go), RPC codes, and the host's errnos. Retry, quota and reaping
// decisions are made on these classes, never on strings.
//
// It is a leaf: sandbox/driver, package sandbox (which re-exports the
// classes), the providers and every server and client import it.
package errdefs
