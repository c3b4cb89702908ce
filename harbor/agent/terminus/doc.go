// Package terminus is berth's host-process LLM agent for Harbor tasks,
// after the design of Terminus-2 (with its own prompt): the model sees a
// terminal in the sandbox and types into it.
//
// Each turn the model answers with one JSON object:
//
//	{"analysis": "...", "plan": "...",
//	 "commands": [{"keystrokes": "ls -la\n", "duration": 0.5}],
//	 "task_complete": false}
//
// The agent types each command's keystrokes into a persistent shell
// (package shell: tmux when the sandbox has it, else a long-lived sh fed
// through the sandbox API), waits up to its duration (less when the
// command is done), and answers with what the terminal showed, bounded.
// A reply that does not parse is answered with what was wrong. A first
// task_complete is answered with a request to confirm; the second ends
// the run. The run also ends at the turn limit, when the model's context
// is full (agent.ErrContextLength: the endpoint refused the prompt as too
// long, or cut a reply at the context budget), or when the endpoint keeps
// failing after the client's retries (agent.ModelError). Sandbox failures
// are agent.SandboxError.
//
// The model is any OpenAI-compatible endpoint (package llm); during a
// rollout it is the trial's session on the session server, which records
// the tokens. The key is used only as a bearer token: it is in no log,
// error, trajectory or result.
//
// After a run, Report gives token counts, per-turn metrics (tokens,
// generation time, tool time, retries) and the trajectory in Harbor's ATIF
// (agent/trajectory.json, which berth view renders).
//
// Who imports it: cmd/berth (berth run -a terminus) and rollout/agents
// (a rollout's terminus agent).
package terminus
