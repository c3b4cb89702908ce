// Package throttle keeps sandbox creation inside a provider's quotas
// (driver.Limits, which registry entries state): a cap on creates in
// flight, a create rate, a cap on live sandboxes, and retries of throttled
// or transient failures through sandbox/retry (the provider's advised wait,
// else jittered exponential backoff) that give their slot back while they
// wait.
//
// Import it from runners and servers that create many sandboxes; drivers
// never do (it is above the user API).
package throttle
