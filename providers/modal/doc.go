// Package modal is the sandbox driver for Modal, built on Modal's official Go
// SDK (github.com/modal-labs/modal-client/go). Package builtin opens it from
// the registry's modal entry; nothing else should import it.
//
// Mapping: every sandbox lives in one app per provider (Options.App, default
// "berth") in the workspace environment (Options.Environment, else the
// profile's default). The Spec's image is a registry reference built with
// Images.FromRegistry; CPUs and memory are requests unless the Spec asks for
// limits; the TTL is the sandbox timeout (whole seconds, at most 24 hours);
// network "none" is BlockNetwork, and an allowlist becomes the SDK's
// outbound CIDR and domain allowlists (a bare address as a /32 or /128;
// both lists are always sent, so that allowlist mode allows nothing else);
// labels are tags, and List finds sandboxes by them. Exec drains stdout and stderr concurrently, because a Modal
// process blocks when a stream is not consumed. Files go through the SDK's
// Filesystem; permission bits other than 0644 are set with chmod in the
// sandbox. Delete is Terminate. Snapshot is the SDK's SnapshotFilesystem:
// it returns "modal-image:<image id>", a Spec.Image that starts new
// sandboxes from the saved file system (Images.FromID).
//
// Stdin goes through the SDK's writer, which calls on a background context
// and retries transient failures for seconds; the driver makes no stdin
// call once the process has ended or its handle has closed, and Close
// waits (bounded) for the calls in flight, so none outlives the provider.
//
// The SDK has no calls for some features, so the driver's handles do not
// implement them and its Capabilities (driver.Derive) say so: SetTimeout
// (a sandbox's timeout is fixed at creation) and Process.Signal (an exec
// has no kill call); the sandbox wrappers answer NotSupported. Commands as
// another user fail with NotSupported. Process.PID is 0: the SDK does not
// report one.
//
// Errors: the SDK's error types carry only a string and do not unwrap, and
// most calls return raw gRPC statuses; both are mapped onto the classes of
// sandbox/errdefs with the cause kept. A throttle (RESOURCE_EXHAUSTED with
// Modal's RPCRetryPolicy) is ResourceExhausted carrying the advised wait
// (errdefs.Error.RetryAfter); a quota (RESOURCE_EXHAUSTED without one) is a
// Permanent ResourceExhausted, so throttle.Gate does not retry it. gRPC
// codes are read through the one RPC mapping of sandbox/errdefs.
// The SDK itself waits out throttles up to Options.MaxThrottleWait before
// they reach the caller.
//
// The SDK reads MODAL_SERVER_URL and MODAL_SANDBOX_V2 from the process
// environment (or the profile file) itself; New refuses to start when
// Options.Getenv disagrees with the process on them, rather than let the
// caller's value be silently ignored. The token pair and the environment
// are handed to the SDK directly.
package modal
