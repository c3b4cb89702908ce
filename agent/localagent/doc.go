// Package localagent is the inside of a local sandbox: what the berth binary
// does when the local provider starts it as the sandbox's PID 1 (the hidden
// `berth agent` verb), and the configuration the provider hands it.
//
// The provider passes two file descriptors: the listening unix socket (fd 3,
// created on the host, see container.ListenUnix) and a pipe holding Config
// as JSON (fd 4). The pipe, not argv or the environment, carries the access
// token: argv and the init's environment stay readable in /proc/1 by the
// sandbox's own processes, while the pipe is read once and closed. Under a
// runtime that passes no fds (gVisor's runsc), Options.RunDir names a
// directory of the sandbox's own instead: the agent reads the Config from
// a file there and removes it before anything else runs, and listens on a
// socket there (RunDirPath).
//
// Main serves the envd protocol (package envd) through pid1.Run, which
// reaps orphans and exits at the deadline, and next to it TreePath: tar
// streams unpacked into, or made of, the sandbox's files by the agent
// itself, so that a tree moves in one call on any image without starting a
// process. Transfers act as the sandbox's default user through that user's
// file system ids on a thread of their own (creds.go); TreeClient is the
// provider's side of that route.
//
// The agent's threads count against the sandbox's pids limit, and the Go
// runtime aborts when it cannot make one it needs, so Main makes its
// threads at start and bounds what can hold one at once (threads.go):
// GOMAXPROCS, envd's file calls (envd.ServerOptions.Blocking) and the
// tree transfers. A fork bomb that takes every pid cannot crash it.
//
// Importers: providers/local (Config, WriteConfig, TreeClient) and
// cmd/berth (the agent verb). Nothing else.
package localagent
