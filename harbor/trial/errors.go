package trial

import (
	"errors"
	"fmt"

	"github.com/berth-sh/berth/results/layout"
	"github.com/berth-sh/berth/sandbox"
)

// Kind is a typed trial failure: layout.Kind, Harbor's exception name as
// result.json records it. The kinds are named here too, where trials make
// them.
type Kind = layout.Kind

// The failure kinds (layout's).
const (
	EnvironmentStartTimeout = layout.EnvironmentStartTimeout
	AgentSetupTimeout       = layout.AgentSetupTimeout
	AgentTimeout            = layout.AgentTimeout
	VerifierTimeout         = layout.VerifierTimeout
	RewardFileNotFound      = layout.RewardFileNotFound
	RewardFileEmpty         = layout.RewardFileEmpty
	VerifierOutputParse     = layout.VerifierOutputParse
	EnvironmentError        = layout.EnvironmentError
	AgentError              = layout.AgentError
	VerifierError           = layout.VerifierError
	ModelError              = layout.ModelError
	ContextLengthExceeded   = layout.ContextLengthExceeded
	Cancelled               = layout.Cancelled
	InvalidTask             = layout.InvalidTask
)

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
