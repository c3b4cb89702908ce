package rollout

import (
	"testing"

	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/results/layout"
)

func TestOutcomes(t *testing.T) {
	graded := &layout.VerifierResult{Rewards: map[string]float64{"reward": 1}}
	exc := func(k trial.Kind) *layout.ExceptionInfo {
		return &layout.ExceptionInfo{ExceptionType: string(k), ExceptionMessage: string(k) + ": why"}
	}
	for _, tc := range []struct {
		name    string
		r       layout.TrialResult
		exit    string
		aborted bool
	}{
		{"graded", layout.TrialResult{VerifierResult: graded}, Submitted, false},
		{"agent timeout, graded", layout.TrialResult{VerifierResult: graded, ExceptionInfo: exc(trial.AgentTimeout)}, TimeLimitExceeded, false},
		{"environment start timeout", layout.TrialResult{ExceptionInfo: exc(trial.EnvironmentStartTimeout)}, TimeLimitExceeded, false},
		{"context full, graded", layout.TrialResult{VerifierResult: graded, ExceptionInfo: exc(trial.ContextLengthExceeded)}, SequenceLengthLimitExceeded, false},
		{"reward file missing", layout.TrialResult{ExceptionInfo: exc(trial.RewardFileNotFound)}, AgentError, false},
		{"agent's own error, graded", layout.TrialResult{VerifierResult: graded, ExceptionInfo: exc(trial.AgentError)}, Submitted, false},
		{"sandbox gone", layout.TrialResult{ExceptionInfo: exc(trial.EnvironmentError)}, AgentError, true},
		{"engine kept failing, graded", layout.TrialResult{VerifierResult: graded, ExceptionInfo: exc(trial.ModelError)}, AgentError, true},
		{"cancelled", layout.TrialResult{ExceptionInfo: exc(trial.Cancelled)}, AgentError, true},
	} {
		o := outcomeOf(&trial.Result{TrialResult: tc.r})
		if o.exitStatus != tc.exit || (o.abortReason != "") != tc.aborted {
			t.Errorf("%s: %+v", tc.name, o)
		}
		if tc.aborted && o.abortReason != tc.r.ExceptionInfo.ExceptionMessage {
			t.Errorf("%s: reason %q", tc.name, o.abortReason)
		}
	}
}
