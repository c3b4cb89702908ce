// Package tbench2 is OpenEnv's tbench2 environment (envs/tbench2_env, as
// Miles' OpenEnv agent requires it) over a berth sandbox: Terminal-Bench 2
// and other Harbor tasks served as exec and evaluate actions, on any
// provider.
//
// Reset takes the task (task_id or task_name, a directory under the tasks
// directory; or task_path, which must resolve inside it) and creates a
// sandbox from the task's image, resources, environment and network as a
// Harbor trial does (harbor/trial.TaskSpec and Prepare). The task's tests
// and solution never enter the sandbox before evaluate. A second reset
// deletes the first sandbox.
//
// Every Tbench2Action type is carried out on the sandbox API:
//
//   - exec: the command through bash (sh where the image has no bash) in the
//     task's working directory, cut off after the command timeout
//     (TB2_COMMAND_TIMEOUT_S; success false and error set when it fires);
//     output is stdout and stderr together, bounded, and info.exit_code is
//     the exit code. With block false it starts in the background under
//     session_id (default "tb2-session") and returns at once.
//   - write, view, wait, kill: on a background session, by session_id (which
//     they require): write sends command and a newline to its stdin, view
//     returns the output not yet returned, wait waits up to wait_seconds
//     (until it exits when unset, bounded by the command timeout) and then
//     does what view does, kill ends it.
//   - write_file: content to file_path (relative paths are under the working
//     directory).
//   - evaluate: the verifier as Harbor runs it (harbor/trial.Verify): tests/
//     uploaded to /tests, tests/test.sh run, the reward read from
//     /logs/verifier/reward.json or reward.txt. The observation has reward,
//     done true, the tail of the verifier's output, and info
//     {"tests_passed", "harness": "tests/test.sh"}. Without a verdict (no
//     reward file, a verifier timeout) error is set, reward is null and info
//     has no harness, so a trainer that trusts only harness-marked rewards
//     drops the episode.
//   - close: the sandbox is deleted; done is true.
//
// A failed action is an observation with success false and error set, as
// OpenEnv's; only a step before any reset is an EXECUTION_ERROR. Closing the
// Env (the end of its WebSocket session, however it ended) deletes the
// sandbox. While a session is active the sandbox's provider-side TTL is
// re-armed, so a server killed outright leaves sandboxes that their TTL
// ends.
//
// Import it from the CLI (`berth openenv serve`), the smoke runner and the
// in-sandbox server (package openenv/insandbox, over agent/selfdriver).
package tbench2
