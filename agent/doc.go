// Package agent is the init program of a local sandbox: the berth binary
// runs agent.Run as PID 1 inside each container. Only the berth command's
// agent entry point imports it; the local provider talks to it over its unix
// socket (the envd protocol served by the Handler, plus SetDeadline here).
//
// Run does four things:
//
//   - serves an http.Handler (the envd server) on a unix socket, either a
//     listener created on the host and passed in as an inherited fd (the
//     container then needs no writable host directory) or a path;
//   - as PID 1, reaps the orphans that the kernel re-parents to it, without
//     stealing the exit status of the processes the Handler started with
//     os/exec (see reap.go for the scheme);
//   - exits at a deadline, so that a sandbox whose creator died still ends at
//     its TTL (PID 1 exiting kills every process of the pid namespace); the
//     deadline can be moved over the socket;
//   - stops on SIGTERM or SIGINT, letting requests in flight finish briefly;
//     except as PID 1, where every signal that would end it is caught and
//     dropped, since the sandbox's own processes can send them to pid 1
//     (signals.go). Only SIGKILL from the host, the deadline or ctx end it.
//
// It uses no cgo: the berth binary is built with CGO_ENABLED=0 so that it
// runs in any image, busybox included.
package agent
