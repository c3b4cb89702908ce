// Package throttle keeps sandbox creation inside a provider's quotas: a cap
// on creates in flight, a create rate, a cap on live sandboxes, and retries
// of throttled or transient failures with jittered exponential backoff that
// give their slot back while they wait.
//
// Import it from runners and servers that create many sandboxes.
package throttle
