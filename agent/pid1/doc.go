// Package pid1 is what runs as PID 1 of a local sandbox: the init
// side of the in-sandbox agent (not to be confused with harbor/agent, the
// agent under test). The berth binary's hidden agent verb runs it through
// agent/localagent, which adds the envd server and the tree
// routes; the local provider talks to it over its unix socket (the envd
// protocol served by the Handler, plus SetDeadline here).
//
// Run does five things:
//
//   - makes the process non-dumpable (Harden), so that no process of the
//     sandbox can ptrace it, read its memory or environment, or take its
//     file descriptors (the listening socket, the host's connections);
//     the seccomp filter of package container refuses those calls aimed
//     at PID 1 as well;
//   - serves an http.Handler (the envd server) on a unix socket, either a
//     listener created on the host and passed in as an inherited fd (the
//     container then needs no writable host directory) or a path;
//   - as PID 1, reaps the orphans that the kernel re-parents to it, without
//     stealing the exit status of the processes the Handler started with
//     os/exec (see package internal/reap for the scheme);
//   - exits at a deadline, so that a sandbox whose creator died still ends at
//     its TTL (PID 1 exiting kills every process of the pid namespace); the
//     deadline can be moved over the socket, which only the host reaches;
//   - stops on SIGTERM or SIGINT, letting requests in flight finish briefly;
//     except as PID 1, where every signal that would end it is caught and
//     dropped, since the sandbox's own processes can send them to pid 1
//     (signals.go). Only SIGKILL from the host, the deadline or ctx end it.
//
// It uses no cgo: the berth binary is built with CGO_ENABLED=0 so that it
// runs in any image, busybox included.
//
// Importers: agent/localagent (the agent's main) and
// providers/local (SetDeadline); container's test init.
package pid1
