// Package container runs one OCI container per sandbox with an external OCI
// runtime binary (runc by default; crun and runsc take the same command line).
// It is the runtime layer of the local provider: only that provider imports
// it. It knows nothing of images or of the agent protocol: it is handed the
// ordered lower directories of an unpacked image, the program to run as PID 1
// and the files to pass it, and it returns a handle that can signal, wait for
// and tear down the container.
//
// There is no user namespace: runc 1.1 cannot id-map the image's files, so
// inside one they show as nobody's and root cannot write them. Isolation
// rests on the other namespaces, dropped capabilities, seccomp and cgroups.
//
// The agent's socket should be created on the host with ListenUnix and
// passed in ExtraFiles, rather than bind-mounting a writable directory.
//
// What Create sets up, in order, each step undone in reverse if a later one
// fails:
//
//   - the per-container directory (upper, work, rootfs, bundle, etc files);
//   - an overlayfs of the lower directories and the upper directory, mounted
//     nosuid,nodev on the host before the runtime starts (about 0.2 ms);
//   - an OCI config (runtime-spec types): new mount, pid, uts, ipc, net and
//     cgroup namespaces, an explicit cgroupsPath under Runtime.CgroupParent,
//     cpu/memory/pids limits, Docker's default capability set minus the ones
//     a sandbox never needs, no_new_privileges, Docker's masked and
//     read-only paths, a seccomp allow list that refuses what it does not
//     name, by number (Docker's on request, see Seccomp; SECURITY.md
//     compares the two call by call), no rlimit
//     changes, and a minimal /dev (null, zero, full,
//     random, urandom, tty, pts, shm, mqueue) behind a deny-all device
//     cgroup;
//   - `runtime run --detach` with stdio on /dev/null and a log file (the
//     runtime's init inherits its stdio, and pipes would keep it attached);
//   - for Network public, slirp4netns attached to the container's network
//     namespace with host loopback disabled, living exactly as long as the
//     container (its exit fd is a pipe whose only writer is inside it),
//     after an nftables filter in that namespace that refuses the host's
//     own addresses and link-local ones (see egress.go).
//
// Delete is the reverse: SIGKILL through a pidfd (killing a pid namespace's
// init kills the namespace), a wait on the pidfd, `runtime delete` (never -f:
// the process is known dead, and -f costs ~100 ms of polling), unmount,
// remove the directory and any cgroup directory left over. It survives
// cancellation of its context and is idempotent.
//
// A container can also start with no image: its one lower directory is a
// blank root (MakeBlankRoot), and SwitchRoot later gives it an image's root
// filesystem while its init runs: the overlay is mounted on the host as
// Create mounts one, a clone of it goes into the container's mount
// namespace (from a thread of this process that enters it), every mount
// the runtime made moves into it, and the namespace pivots to it. That is
// how the local provider starts sandboxes ahead of knowing their image.
// Delete removes both overlays.
//
// On a host whose PID 1 does not reap orphans, call SetSubreaper once at
// start-up: the container inits then become children of this process and the
// handle reaps them.
package container
