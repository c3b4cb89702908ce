// Package localtest checks that tests running the local provider leave
// nothing behind on the host (sandbox directories, mounts, cgroups) and
// removes what they did leave, without walking into a live sandbox's
// rootfs. Import it only from tests: the TestMain of providers/local and of
// serve, whose tests run local sandboxes.
package localtest
