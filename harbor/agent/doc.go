// Package agent defines what the Harbor runner calls an agent (something
// that works on a task inside a sandbox) and the two built in: oracle, which
// runs the task's own solution (the golden agent), and nop, which does
// nothing. Model agents (harbor/agent/terminus on this host,
// harbor/agent/command inside the sandbox) implement the same interface
// and Reporter, through which the trial records their model's token counts,
// per-turn metrics and trajectory; their failures are typed apart:
// ErrContextLength (the model's context is full), SandboxError (the
// sandbox failed under them), ModelError (the endpoint kept failing).
//
// Import it from the runner and from whatever registers more agents.
package agent
