package rollout

import (
	"testing"

	"github.com/berth-sh/berth/harbor/trial"
)

func TestOutcomes(t *testing.T) {
	graded := &trial.VerifierResult{Rewards: map[string]float64{"reward": 1}}
	exc := func(k trial.Kind) *trial.ExceptionInfo {
		return &trial.ExceptionInfo{ExceptionType: string(k), ExceptionMessage: string(k) + ": why"}
	}
	for _, tc := range []struct {
		name    string
		r       trial.Result
		exit    string
		aborted bool
	}{
		{"graded", trial.Result{VerifierResult: graded}, Submitted, false},
		{"agent timeout, graded", trial.Result{VerifierResult: graded, ExceptionInfo: exc(trial.AgentTimeout)}, TimeLimitExceeded, false},
		{"environment start timeout", trial.Result{ExceptionInfo: exc(trial.EnvironmentStartTimeout)}, TimeLimitExceeded, false},
		{"context full, graded", trial.Result{VerifierResult: graded, ExceptionInfo: exc(trial.ContextLengthExceeded)}, SequenceLengthLimitExceeded, false},
		{"reward file missing", trial.Result{ExceptionInfo: exc(trial.RewardFileNotFound)}, AgentError, false},
		{"agent's own error, graded", trial.Result{VerifierResult: graded, ExceptionInfo: exc(trial.AgentError)}, Submitted, false},
		{"sandbox gone", trial.Result{ExceptionInfo: exc(trial.EnvironmentError)}, AgentError, true},
		{"engine kept failing, graded", trial.Result{VerifierResult: graded, ExceptionInfo: exc(trial.ModelError)}, AgentError, true},
		{"cancelled", trial.Result{ExceptionInfo: exc(trial.Cancelled)}, AgentError, true},
	} {
		o := outcomeOf(&tc.r)
		if o.exitStatus != tc.exit || (o.abortReason != "") != tc.aborted {
			t.Errorf("%s: %+v", tc.name, o)
		}
		if tc.aborted && o.abortReason != tc.r.ExceptionInfo.ExceptionMessage {
			t.Errorf("%s: reason %q", tc.name, o.abortReason)
		}
	}
}
