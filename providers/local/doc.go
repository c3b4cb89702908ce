// Package local is the local provider, berth's embedded default: sandboxes
// on this host from OCI images, with no daemon and no account. Images come
// from registries or tarballs (package image), each sandbox is an OCI
// container run by runc over an overlay of the image's layers (package
// container), and berth's agent (cmd/berth-agent) runs inside as PID 1, serving
// E2B's envd protocol on a unix socket that stays on the host (package
// localagent). Exec and file calls are envd calls on that socket.
//
// Importers: package builtin (the registry entry) and the CLI's image verbs
// (StateDir, RemoveImage). Runners and servers reach it through the
// registry by name.
//
// # State on disk
//
// Everything lives under one state directory (Options.StateDir; default
// /var/lib/berth for root):
//
//	<state>/images, <state>/layers   the image store (package image)
//	<state>/runc                     the OCI runtime's --root
//	<state>/blank/<digest>/           pooled sandboxes' root before Create (see Pool)
//	<state>/builds/<key>.lock        taken while an image of that key builds
//	<state>/owners/*.lock            one per open Provider, locked while it is open
//	<state>/sandboxes/<id>/          one sandbox:
//	    meta.json                    labels, image, created, expires, token, socket
//	    agent.sock                   the agent's listening socket
//	    providers/local/container/                   the container (upper layer, rootfs mount, logs;
//	                                 disk.img and its mount disk/ with a StorageMB)
//
// meta.json is written last, when the agent has answered, so a sandbox
// directory without one is either being created or kept ready by a pool
// (its creator holds a flock on the directory) or the leftover of a
// creator that died; Reap removes the latter. The directory and meta.json
// are root's alone (mode 0700 and 0600): the token in meta.json is what
// lets Connect work from any process.
//
// # Lifetime
//
// The agent exits at the sandbox's deadline (set at create from the TTL and
// moved by SetTimeout), and PID 1 exiting ends every process in the
// sandbox, so a sandbox ends at its TTL even if its creator was killed.
// What it leaves (runtime state, the overlay mount, cgroup directories, the
// sandbox directory) is removed lazily by List and Connect when they meet
// it, and by Reap, which `berth sandboxes reap` calls.
//
// A berth process that dies with the provider open (SIGKILL, a crash)
// leaves its lock file in <state>/owners unlocked; the next New on the
// state directory finds it and removes what such a process leaves:
// ended and half-made sandboxes, its pool's members (their agents exit
// when the pipe they wait on closes), their mounts, cgroups and runtime
// state, and runtime state no sandbox directory names (owners.go); a
// disk's mount goes with the rest, and its loop device with the mount.
// Nobody has to run reap after a crash. The host side of every overlay is
// mounted nosuid and nodev.
//
// # Resources
//
// Spec.Resources are hard limits: cpus as a CFS quota, memory (no swap),
// and a pids limit (Options.Pids, default 1024). The agent's threads count
// against the pids limit (about 30): it starts them before it serves, so
// that commands holding every other pid leave it able to answer (see
// localagent's threads.go). StorageMB is a disk of that size
// (container.Config.DiskBytes, at least 16 MB): the sandbox's upper layer,
// and the /etc files berth writes for it (hosts, hostname, resolv.conf:
// writable bind mounts, as in Docker), live on an ext4 file system in a
// sparse file of its own directory,
// loop-mounted nosuid and nodev, so a write past it gets ENOSPC and the
// host's disk holds at most StorageMB for it (plus its small files). It
// needs loop devices and mkfs.ext4 (e2fsprogs), refused as NotSupported
// without them; it costs a cold create ~50 ms and a pooled one nothing
// (see Pool; BENCHMARKS.md). It holds under runsc too (the writes reach
// the same upper through the gofer). GPUs are not supported.
// Network none is a fresh network namespace with loopback only; public
// adds slirp4netns, which connects from the host on the sandbox's behalf.
// So that the sandbox cannot reach the host, an nftables filter in the
// sandbox's own namespace (package container, egress.go; the sandbox
// lacks CAP_NET_ADMIN to remove it) refuses every address on the host's
// interfaces (IPv4 and IPv6), link-local 169.254.0.0/16 and fe80::/10
// (metadata services), multicast, broadcast and slirp's host-facing
// addresses, all but its DNS forwarder (10.0.2.3, port 53); slirp4netns
// refuses the host's loopback itself. Known limit: the host's addresses
// are read when the sandbox's container starts (for a pooled sandbox,
// when the pool started it), so an address the host gains later is
// reachable from sandboxes made before. Other machines on the host's
// network are reachable, as from the host.
//
// # Building images
//
// A Spec with a Build is built from its Dockerfile by package imagebuild,
// with this provider as its Host (build.go), by PrepareImage, or by Create
// when it was not prepared: in one sandbox of the base image, with the
// Spec's network and resources, committed as one layer on top of the base
// and stored as berth.build/<name>:<key>, where the key digests the base
// image, the Dockerfile, the build args and every context file a COPY or
// ADD names. A stored key is a cache hit that starts no sandbox. After each
// RUN every process it left is killed (container.KillAllButInit) before
// the host writes into the sandbox's root again.
//
// # Pool
//
// Options.Pool keeps sandboxes started ahead of Create, for each network
// mode and disk size (StorageMB) a Create asked for, up to 8 such keys.
// They have no image: any image's Create takes one; the disk is made when
// the ready sandbox starts, so the Create that takes it pays nothing for
// it, and the first Create of a new size is cold. Off in the zero Options: each ready sandbox is an idle agent
// (~5 MiB charged to its cgroup), and a one-shot process would start
// sandboxes it never uses. The registry's local entry turns it on (2 per
// network mode, BERTH_POOL_SIZE) for every launcher but berth's one-shot
// commands.
//
// A ready sandbox is a running container on a blank root (an empty lower
// directory under <state>/blank), whose agent has started (runtime and package
// inits done) and blocks reading its config pipe, whose write end only the
// pool's process holds. Create takes one for its network mode, writes the
// Spec's limits into its cgroups, and switches its root to the image's
// (container.SwitchRoot: an overlay of the image's layers and a new upper
// directory, into which the container's proc, dev, sys, /etc files and the
// agent's mounts move before its mount namespace pivots to it; the agent
// finds itself in the image without doing anything and without any
// privilege). Then it sends the token, deadline, user, working directory
// and environment (the image's and the Spec's) down the pipe, waits for
// the first answer and writes meta.json: from then on it is a sandbox like
// any other, with the same mounts, limits, capabilities and seccomp filter
// as one started cold. Its ID and hostname were chosen when it started. A
// background goroutine replaces what was taken, one at a time. On the
// 2-core CI machine, quiet, create to first exec is about 6 ms p50 pooled
// against 38 ms cold (BenchmarkCreateToFirstExecPool, BenchmarkVsRunc;
// BENCHMARKS.md).
//
// A ready sandbox has no meta.json and its directory stays locked by its
// owner, so List, Connect and Delete do not see it and Reap leaves it
// alone. Close removes the ready sandboxes. If the owner dies, its agents
// read EOF on the pipe and exit, its lock goes, and Reap removes what is
// left as for any creator that died mid-create. Specs whose user runs the
// agent itself (a numeric uid without a passwd entry) are always created
// cold, and so is a sandbox whose ready one failed to take its Spec (that
// one is removed).
//
// # gVisor
//
// With Options.Runtime "runsc" (berth --runtime runsc, or
// $BERTH_RUNTIME=runsc; Debian package
// runsc) sandboxes run under gVisor: their system calls go to a kernel in
// user space, so a bug in the host's kernel is no way out. runsc passes no
// fds into a container, so the agent gets a directory of the sandbox's own
// (<sandbox>/run, a 256 KiB tmpfs on the host so that what a sandbox
// process writes there is bounded, mounted at /.berth/run): its Config is
// written there
// (root's alone; the agent removes it before anything else runs) and its
// socket is made there (runsc --host-uds=create). A process of the sandbox
// can reach that socket, but every call needs the sandbox's token, the
// deadline's too; a root process there can replace the socket file, and
// the host then talks to that process instead (which can answer for the
// sandbox, which it controls anyway, and reach nothing of the host's); the
// deadline still ends the sandbox. Not supported under runsc, each refused
// as NotSupported: network public, the pool (turned off) and image builds
// (build with runc first: the image is then a cache hit). Cost: see
// BENCHMARKS.md.
//
// # The agent binary
//
// The binary mounted into each sandbox is Options.AgentBinary, default
// berth-agent beside the running executable, else the running executable
// itself. berth-agent (cmd/berth-agent) is the agent alone: 14 MB against
// berth's 150 MB, a tenth of its start-up time and memory, and nothing of
// the cloud SDKs in PID 1; berth's hidden `agent` verb runs the same code
// (a `go run ./cmd/berth` has no berth-agent beside it). A static build
// (CGO_ENABLED=0 go build ./cmd/berth-agent) runs as it is, in any image. `go build` links berth against libc when a
// C compiler is installed (packages net and os/user use cgo), and such a
// binary cannot start in an image without the host's libc (busybox,
// distroless) or with another one (musl); the provider then runs it through
// the host's dynamic loader invoked as a program (ld.so --library-path),
// with the loader and the libraries it lists mounted read-only under
// /.berth. The image's own /lib is untouched and the commands the agent
// starts use it as usual.
package local
