// Package smoke runs the golden episode: one task on one provider through
// the five phases image resolution, sandbox create, exec, verifier and
// teardown, each timed, ending in PASS (reward 1.0 and exit status
// Submitted) or FAIL. It proves a provider end to end in seconds.
//
// Without a task it runs a small built-in one that needs nothing but a
// shell, on the provider's default image.
//
// Import it from the CLI (`berth smoke`) and from the golden test.
package smoke
