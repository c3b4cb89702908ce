// Package trial runs one Harbor trial: a task, an agent and a sandbox from a
// provider, through the phases environment start, agent setup, agent run,
// verification and teardown, each under its own timeout, and writes the
// trial directory in Harbor's layout (config.json, result.json, trial.log,
// exception.txt, agent/, verifier/: the types and names of package
// results/layout, which the results reader reads).
//
// Failures are typed with Harbor's exception names (layout.Kind) so tools
// written for Harbor read the results. Teardown runs even when the
// caller's context is cancelled.
//
// Import it from the job runner and the smoke command.
package trial
