package layout_test

import (
	"testing"

	"github.com/berth-sh/berth/results/layout"
)

// TestExitStatus pins the one mapping from a trial's result to an
// episode's exit status that smoke, rollouts and the viewer share (the
// viewer once showed a full context as Submitted).
func TestExitStatus(t *testing.T) {
	verdict := &layout.VerifierResult{Rewards: map[string]float64{"reward": 1}}
	for _, c := range []struct {
		kind     layout.Kind // "" is no exception
		verifier bool
		want     string
	}{
		{"", true, layout.ExitSubmitted},
		{"", false, layout.ExitAgentError},
		{layout.AgentTimeout, true, layout.ExitTimeLimitExceeded},
		{layout.EnvironmentStartTimeout, false, layout.ExitTimeLimitExceeded},
		{layout.VerifierTimeout, false, layout.ExitTimeLimitExceeded},
		{layout.ContextLengthExceeded, true, layout.ExitSequenceLengthLimitExceeded},
		{layout.Cancelled, false, layout.ExitCancelled},
		{layout.AgentError, true, layout.ExitSubmitted}, // the agent failed; its work was still scored
		{layout.EnvironmentError, true, layout.ExitAgentError},
		{layout.ModelError, true, layout.ExitAgentError},
		{layout.RewardFileNotFound, false, layout.ExitAgentError},
	} {
		r := &layout.TrialResult{}
		if c.kind != "" {
			r.ExceptionInfo = &layout.ExceptionInfo{ExceptionType: string(c.kind)}
		}
		if c.verifier {
			r.VerifierResult = verdict
		}
		if got := r.ExitStatus(); got != c.want {
			t.Errorf("%q (verifier ran: %v): exit status %s, want %s", c.kind, c.verifier, got, c.want)
		}
	}
}
