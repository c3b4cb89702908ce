// Package testimage builds container images for tests, offline: a busybox
// image from the host's busybox-static, a Debian minbase image made with
// debootstrap from the machine's apt mirror (cached), small hand-made
// layers (for whiteout and attack cases), the tarball forms `berth image
// import` reads, and an in-process registry that serves them.
//
// Importers: tests of the image store (package image) and of the local
// provider. It is internal and test-only; it uses go-containerregistry,
// whose v1.Image it hands out, because tests push and pull real images.
package testimage
