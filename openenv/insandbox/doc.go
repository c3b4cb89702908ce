// Package insandbox is the tbench2 OpenEnv server in the task's own
// sandbox, the layout of Miles' sandbox recipe, without its per-task image
// build or Python: the static berth-agent binary is uploaded into the
// sandbox with the task (its solution left out) and serves OpenEnv on a
// port that the launcher reaches through the sandbox's Endpoint.
//
// Two sides:
//
//   - Serve runs inside the sandbox (`berth-agent openenv`): the tbench2
//     environment over package here, so that exec and evaluate are local
//     processes of the sandbox it runs in. It holds one session (Miles'
//     MAX_CONCURRENT_ENVS=1) and, given a key, answers only requests that
//     carry it (Modal's tunnels and E2B's hosts are public URLs).
//   - Launch runs on the launcher: it creates the task's sandbox (image,
//     resources, network, labels, TTL, the port declared), uploads the
//     agent and the task, starts Serve through package up, waits for
//     /health through Endpoint, and returns a client's base URL and
//     headers. Keep re-arms the sandbox's TTL while the episode runs;
//     Close deletes the sandbox, also when the client vanished mid-episode.
//
// The tests are in the sandbox from the start (under AgentDir, mode 0700):
// a task whose agent runs as root can read them, as in Miles' recipe. The
// hosted server (`berth openenv serve`) is the layout that keeps them out
// until evaluate.
//
// Import it from berth-agent, the smoke runner and the CLI.
package insandbox
