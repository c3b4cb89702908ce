// Package agents has berth's agents for rollouts (rollout.Agent): each
// trial's agent pointed at the trial's own session on the session server.
//
//   - Terminus runs on this host and drives the sandbox's shell; its model
//     endpoint is the session's URL.
//   - Command is a harness inside the sandbox, reaching its session through
//     the reverse port, or through an external URL (the session server's
//     base URL as sandboxes reach it) on providers without one; a backend
//     with neither is refused before any sandbox is made.
//
// Import it from the program that picks a rollout's agent (cmd/berth's
// berth rollout, tests, trainers written in Go); package rollout itself
// picks none.
package agents
