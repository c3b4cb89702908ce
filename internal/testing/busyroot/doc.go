// Package busyroot lays a busybox userland into a directory, for the fakes
// that run commands confined to a sandbox's tree: internal/testing/fakeengine
// lays each sandbox's root with it, the layout (applet list, /etc files,
// extra directories) coming from the fake in front (fakeprovider,
// daytonatest, modaltest). It writes what a tar cannot carry for an
// unprivileged extract (device nodes). providers/local/image/seed builds
// the same userland as an image layer instead, for providers that run real
// containers.
//
// Import it only from test doubles; making /dev nodes needs root.
package busyroot
