// Package command is the in-sandbox agent (`-a command --agent-cmd '...'`):
// it runs a harness installed in the task's image (mini-swe-agent,
// claude-code, any CLI) inside the sandbox with the model endpoint in its
// environment:
//
//	OPENAI_API_BASE, OPENAI_BASE_URL  the endpoint's OpenAI base URL (…/v1)
//	OPENAI_API_KEY                    the key for it
//	ANTHROPIC_BASE_URL                the same endpoint, Anthropic style
//	                                  (the client appends /v1/messages)
//	ANTHROPIC_API_KEY                 the key for it
//	BERTH_MODEL                       the model name, when one is given
//	BERTH_INSTRUCTION_FILE            the task's instruction, as a file
//	BERTH_INSTRUCTION                 the same text (when under 64 KiB)
//
// The endpoint reaches the sandbox one of two ways:
//
//   - Through the reverse port (sandbox.Forward), on providers that have it
//     (local), even on network none: a relay on this host's loopback
//     carries the sandbox's requests to the endpoint. The sandbox is given
//     http://127.0.0.1:PORT/v1 and a per-trial token, never the real key:
//     the relay checks the token, lets through only paths under /v1/ (so a
//     session server's control routes and other sessions stay out of
//     reach), and adds the real key on its way out. An https endpoint works
//     too: the relay speaks TLS to it.
//   - Through an external URL (Options.ExternalBase), an address the
//     sandbox reaches on its own network, for providers without the
//     reverse port (e2b, daytona, modal, k8s). The key then travels into
//     the sandbox's environment; it is scrubbed from the agent's log.
//
// Neither available is an error of class NotSupported that says what to
// give (CheckRoute tells before any sandbox is made).
//
// The harness runs with sh in the task's working directory, its stdout
// and stderr in /logs/agent/command.txt (the trial's agent/command.txt);
// a non-zero exit is the agent's answer (agent/exit-code.txt), the agent's
// timeout ends the trial as AgentTimeoutError (a rollout's
// TimeLimitExceeded).
//
// Import it from the CLI and from rollout/agents (a rollout's command agent).
package command
