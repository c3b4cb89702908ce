// Package seed builds a small image offline from what the host already has:
// a busybox rootfs from Debian's busybox-static (/bin/busybox, a static
// binary whose applets give a POSIX shell and coreutils). The local provider
// imports it to seed its default image ("berth.local/busybox:latest") on a
// machine with no registry at hand, and internal/testing/testimage builds its
// busybox test image with it. It writes a plain rootfs tar, the form
// image.Store.Import reads; it knows nothing of the store.
package seed
