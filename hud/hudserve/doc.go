// Package hudserve serves Harbor / Terminal-Bench tasks over HUD's
// protocol from sandboxes of any provider, with no Python and no HUD
// package in the image: `berth hud serve`.
//
// Each control session gets its own sandbox, created at tasks.start from
// the task's image, resources, environment and network as a Harbor trial
// creates it (harbor/trial.TaskSpec and Prepare); the instruction is the
// prompt. tasks.grade runs the task's verifier as a trial does
// (harbor/trial.Verify) and returns the main reward as the score; a
// verifier that gave no verdict (timeout, no or bad reward file) is score
// 0 with isError set, as HUD's own Harbor adapter reports it. A graded,
// cancelled or replaced task's sandbox is deleted, and so is a session's
// when it says bye, or when its connection drops and the heartbeat window
// passes without a resuming hello.
//
// The shell is offered as two capabilities in every hello reply, each
// with credentials of that session alone:
//
//   - "tools", protocol mcp/2025-11-25 over streamable HTTP at
//     http://ADDR/sessions/<session id>/mcp with a bearer token
//     (params.auth_token): bash, read_file, write_file, list_dir;
//   - "shell", protocol ssh/2 at ssh://ADDR, user "agent", public-key
//     authentication with the session's own key (params.client_key) and
//     the server's host key (params.host_pubkey).
//
// Both are reached through tunnel.open on the control port (HUD's client
// reroutes every binding that way); the MCP path and token, or the SSH
// key, pick the session, so a tunnel can never reach another session's
// sandbox.
//
// Import it from the CLI and the smoke runner.
package hudserve
