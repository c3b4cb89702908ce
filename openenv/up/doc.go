// Package up starts an HTTP server inside a sandbox and hands back how to
// reach it: the OpenEnv layout in which the env server runs in the task's
// sandbox (any OpenEnv env image, `berth openenv up`; berth's own tbench2
// server, package openenv/insandbox).
//
// Start creates the sandbox with the server's port declared, runs a Stage
// step (uploads), starts the command in the background (detached from the
// exec that started it: setsid where the image has it, output to a log
// file in the sandbox), and polls GET /health through the sandbox's
// Endpoint until it answers 200. A server that exits before it is healthy
// fails the start with the tail of its log. Anything that fails deletes
// the sandbox.
//
// Keep holds the sandbox alive while its caller runs: it re-arms the
// provider-side TTL every TTL/6 (so a launcher killed outright leaves a
// sandbox that its TTL ends) and renews an Endpoint that expires (Daytona's
// signed preview URLs) before it does. Close deletes the sandbox, also
// after its context ended.
//
// Import it from the CLI and from launchers of in-sandbox servers.
package up
