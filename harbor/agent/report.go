package agent

import (
	"errors"
	"fmt"
)

// Reporter is implemented by agents that have more to say than whether they
// finished: a model's token usage, per-turn metrics, a trajectory. The
// trial calls Report once after Run, whatever Run returned (a timed-out or
// failed run reports what it did up to then), and records it in
// result.json's agent_info and agent_result and in the trial's agent/
// directory.
type Reporter interface {
	Report() Report
}

// Report is what a Reporter hands the trial.
type Report struct {
	// InputTokens and OutputTokens sum the model's prompt and completion
	// tokens over the run (agent_result.n_input_tokens, n_output_tokens).
	InputTokens, OutputTokens *int64
	// CachedTokens sums the prompt tokens the engine had cached
	// (agent_result.n_cache_tokens).
	CachedTokens *int64
	// ModelInfo is agent_info.model_info ({"name", "provider"}).
	ModelInfo map[string]string
	// Metadata is agent_result.metadata: per-turn metrics and totals.
	Metadata map[string]any
	// Files are written into the trial's agent/ directory after the
	// sandbox's /logs/agent was downloaded there, so the sandbox cannot
	// replace them; names are plain relative paths (trajectory.json).
	Files map[string][]byte
}

// ErrContextLength marks a run that ended because the model's context is
// exhausted: the endpoint refused the prompt as too long, or the reply was
// cut at a full context. The trial records ContextLengthExceededError; a
// rollout's exit status is SequenceLengthLimitExceeded.
var ErrContextLength = errors.New("the model's context length is exhausted")

// SandboxError marks an agent failure caused by the sandbox (an exec or a
// file call that failed), apart from the agent's and the model's own. The
// trial records it as an environment error, retried when its class is
// transient.
type SandboxError struct{ Err error }

func (e *SandboxError) Error() string { return fmt.Sprintf("sandbox: %v", e.Err) }
func (e *SandboxError) Unwrap() error { return e.Err }

// ModelError marks a failure of the model endpoint that retries did not
// cure (throttled, unavailable, refused), apart from sandbox errors.
type ModelError struct{ Err error }

func (e *ModelError) Error() string { return fmt.Sprintf("model endpoint: %v", e.Err) }
func (e *ModelError) Unwrap() error { return e.Err }
