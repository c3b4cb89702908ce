// Package busyroot lays a busybox userland into a directory, for the fakes
// that run commands chrooted into a sandbox's tree: internal/testing/fakeprovider,
// providers/daytona/daytonatest and providers/modal/modaltest. It writes
// what a tar cannot carry for an unprivileged extract (device nodes) and
// what those fakes differ on (applet list, /etc files, extra directories)
// comes from the caller. providers/local/image/seed builds the same userland as an image
// layer instead, for providers that run real containers.
//
// Import it only from test doubles; making /dev nodes needs root.
package busyroot
