// Package sandboxtest is the one conformance suite every provider runs:
// sandboxtest.Run(t, harness) checks the contracts written on the methods of
// package sandbox/driver through the sandbox API, with a fresh sandbox per
// parallel subtest. Import it from a provider's _test.go files.
//
// The suite gates on the provider's Capabilities, never on a list of cases
// a provider asks to skip: a case of an optional feature (SetTimeout,
// Signal, trees with links, pause, snapshots and restore, forks, envd,
// allowlist networks) checks the feature where the capability is claimed,
// and that the call is refused as NotSupported where it is not. Capabilities are derived from the driver's
// interfaces (driver.Derive), so a claim the driver cannot keep fails here.
//
// Commands in the suite are POSIX sh (busybox or bash images) and find files
// relative to a working directory, so the suite does not depend on where a
// provider keeps a sandbox's files.
package sandboxtest
