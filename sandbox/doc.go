// Package sandbox is the user-facing API of berth: a Provider hands out
// Sandboxes from a Spec, a Sandbox runs Commands and moves files, and every
// failure carries one of a closed set of error classes.
//
// Import it from runners, servers and tools that drive sandboxes. Providers
// implement the smaller interfaces of package sandbox/driver; the concrete
// types here wrap a driver and do the shared work once for all of them:
// defaults, validation, rejecting calls after Close, attaching the sandbox ID
// to errors, deleting a sandbox whose Create returned after its caller gave
// up, and falling back to plain file calls for tree upload and download.
//
// This package imports no provider, runner, server or CLI code.
package sandbox
