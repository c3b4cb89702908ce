package layout

// Kind is a typed trial failure: Harbor's exception name, as it lands in
// result.json's exception_info.exception_type. The trial runner (package
// harbor/trial) makes them and decides which it retries.
type Kind string

// The failure kinds.
const (
	EnvironmentStartTimeout Kind = "EnvironmentStartTimeoutError"
	AgentSetupTimeout       Kind = "AgentSetupTimeoutError"
	AgentTimeout            Kind = "AgentTimeoutError"
	VerifierTimeout         Kind = "VerifierTimeoutError"
	RewardFileNotFound      Kind = "RewardFileNotFoundError"
	RewardFileEmpty         Kind = "RewardFileEmptyError"
	VerifierOutputParse     Kind = "VerifierOutputParseError"
	// Infrastructure failures, named by berth: the provider's error class
	// decides whether the job retries.
	EnvironmentError Kind = "EnvironmentError"
	AgentError       Kind = "AgentError"
	VerifierError    Kind = "VerifierError"
	// ModelError is a model endpoint that failed after the agent's own
	// retries (LLM agents), apart from the sandbox's failures.
	ModelError Kind = "ModelError"
	// ContextLengthExceeded ends an LLM agent whose model context is full
	// (Harbor's name); verification still runs.
	ContextLengthExceeded Kind = "ContextLengthExceededError"
	Cancelled             Kind = "CancelledError"
	// InvalidTask is a task that cannot run (a malformed task.toml, a
	// missing test script); the problems name file, line and field.
	InvalidTask Kind = "InvalidTaskError"
)

// TimeLimit reports whether the kind is a phase that ran out of time.
func (k Kind) TimeLimit() bool {
	switch k {
	case EnvironmentStartTimeout, AgentSetupTimeout, AgentTimeout, VerifierTimeout:
		return true
	}
	return false
}

// Infrastructure reports whether the kind is a failure of the
// infrastructure around the policy (the sandbox, the verifier's run, the
// model endpoint, a cancel, an unrunnable task) rather than the policy's
// own answer: a rollout's samples of such a trial are ABORTED.
func (k Kind) Infrastructure() bool {
	switch k {
	case EnvironmentError, VerifierError, ModelError, Cancelled, InvalidTask:
		return true
	}
	return false
}
