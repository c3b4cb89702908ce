package trial_test

import (
	"testing"

	"github.com/berth-sh/berth/harbor/trial"
)

// TestExitStatus pins the one mapping from a trial's result to an
// episode's exit status that smoke, rollouts and the viewer share (the
// viewer once showed a full context as Submitted).
func TestExitStatus(t *testing.T) {
	verdict := &trial.VerifierResult{Rewards: map[string]float64{"reward": 1}}
	for _, c := range []struct {
		kind     trial.Kind // "" is no exception
		verifier bool
		want     string
	}{
		{"", true, trial.ExitSubmitted},
		{"", false, trial.ExitAgentError},
		{trial.AgentTimeout, true, trial.ExitTimeLimitExceeded},
		{trial.EnvironmentStartTimeout, false, trial.ExitTimeLimitExceeded},
		{trial.VerifierTimeout, false, trial.ExitTimeLimitExceeded},
		{trial.ContextLengthExceeded, true, trial.ExitSequenceLengthLimitExceeded},
		{trial.Cancelled, false, trial.ExitCancelled},
		{trial.AgentError, true, trial.ExitSubmitted}, // the agent failed; its work was still scored
		{trial.EnvironmentError, true, trial.ExitAgentError},
		{trial.ModelError, true, trial.ExitAgentError},
		{trial.RewardFileNotFound, false, trial.ExitAgentError},
	} {
		r := &trial.Result{}
		if c.kind != "" {
			r.ExceptionInfo = &trial.ExceptionInfo{ExceptionType: string(c.kind)}
		}
		if c.verifier {
			r.VerifierResult = verdict
		}
		if got := r.ExitStatus(); got != c.want {
			t.Errorf("%q (verifier ran: %v): exit status %s, want %s", c.kind, c.verifier, got, c.want)
		}
	}
}
