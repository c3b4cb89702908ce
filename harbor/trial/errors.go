package trial

import (
	"errors"
	"fmt"

	"github.com/berth-sh/berth/sandbox"
)

// Kind is a typed trial failure. Its String is Harbor's exception name,
// which lands in result.json's exception_info.exception_type.
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

// Retryable reports whether a job may run the trial again after this
// failure. Timeouts and reward problems are the task's or agent's answer,
// never retried; infrastructure errors are retried when their class is
// transient (Unavailable, ResourceExhausted) and not Permanent. Only the
// class decides (sandbox.Retryable): an agent whose own output says "rate
// limit exceeded" has failed, not the infrastructure.
func (e *Error) Retryable() bool {
	switch e.Kind {
	case EnvironmentError, AgentError, VerifierError, ModelError:
		return sandbox.Retryable(e.Err)
	}
	return false
}

// Error is a trial failure with its kind.
type Error struct {
	Kind Kind
	Err  error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return string(e.Kind)
	}
	return fmt.Sprintf("%s: %v", e.Kind, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

func fail(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Err: fmt.Errorf(format, args...)}
}

// KindOf returns the kind of a trial error, "" for nil.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	if err != nil {
		return AgentError
	}
	return ""
}
