// Package smoke runs the golden episode: one task on one provider through
// the five phases image resolution, sandbox create, exec, verifier and
// teardown, each timed, ending in PASS (reward 1.0 and exit status
// Submitted) or FAIL. It proves a provider end to end in seconds.
//
// Without a task it runs a small built-in one that needs nothing but a
// shell, on the provider's default image.
//
// Two connectors drive the episode: harbor (a Harbor trial, the oracle
// agent) and openenv (berth's hosted OpenEnv tbench2 server in process: a
// reset creates the sandbox, solve.sh is pushed in base64 chunks and run
// through exec actions as Miles' scan_golden does, evaluate scores with the
// task's verifier, and the close deletes the sandbox).
//
// Import it from the CLI (`berth smoke`) and from the golden test.
package smoke
