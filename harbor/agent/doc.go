// Package agent defines what the Harbor runner calls an agent (something
// that works on a task inside a sandbox) and the two built in: oracle, which
// runs the task's own solution (the golden agent), and nop, which does
// nothing. The LLM harness will implement the same interface.
//
// Import it from the runner and from whatever registers more agents.
package agent
