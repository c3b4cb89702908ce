// Package sandboxtest is the one conformance suite every provider runs:
// sandboxtest.Run(t, harness) checks the contracts written on the methods of
// package sandbox/driver through the sandbox API, with a fresh sandbox per
// parallel subtest. Import it from a provider's _test.go files.
//
// Commands in the suite are POSIX sh (busybox or bash images) and find files
// relative to a working directory, so the suite does not depend on where a
// provider keeps a sandbox's files.
package sandboxtest
