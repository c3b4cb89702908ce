// Package sandbox is the user-facing API of berth: a Provider hands out
// Sandboxes from a Spec, a Sandbox runs Commands and moves files, and every
// failure carries one of a closed set of error classes.
//
// Import it from runners, servers and tools that drive sandboxes. Providers
// implement the smaller interfaces of package sandbox/driver; the concrete
// types here wrap a driver and do the shared work once for all of them:
// defaults, validation, making Close wait for the calls in flight and
// rejecting calls after it, attaching the sandbox ID to errors, deleting a
// sandbox whose Create returned after its caller gave up, answering
// NotSupported for the optional features a driver lacks (its Capabilities
// say which), and falling back to plain file calls for tree upload and
// download.
//
// Errors carry a class and, where the provider said, the wait it advised
// and whether waiting can help at all (Error.RetryAfter, Error.Permanent).
// Retry loops decide on those alone (Retryable), never on an error's text.
//
// This package imports no provider, runner, server or CLI code.
package sandbox
