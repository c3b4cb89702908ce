package trial_test

import (
	"errors"
	"testing"

	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/sandbox"
)

// TestRetryIsDecidedOnClass: an agent or verifier failure whose text reads
// like a throttle (an agent printing "rate limit exceeded", a test script
// quoting "429") is the task's answer, not infrastructure, and is never
// retried; only a retryable class that is not permanent is. On 6f9918d the
// job retried any unclassified error whose text held "429", "rate limit",
// "throttler" or "limit exceeded": checked there, this test failed.
func TestRetryIsDecidedOnClass(t *testing.T) {
	for _, tc := range []struct {
		err  *trial.Error
		want bool
	}{
		{&trial.Error{Kind: trial.AgentError, Err: errors.New("agent exited 1: openai: 429 rate limit exceeded")}, false},
		{&trial.Error{Kind: trial.VerifierError, Err: errors.New("test.sh: Too Many Requests (throttler: tests)")}, false},
		{&trial.Error{Kind: trial.EnvironmentError, Err: errors.New("Total disk limit exceeded")}, false},
		{&trial.Error{Kind: trial.EnvironmentError, Err: sandbox.Errorf(sandbox.DeadlineExceeded, "create timed out")}, false},
		{&trial.Error{Kind: trial.EnvironmentError, Err: sandbox.Errorf(sandbox.Unavailable, "connection reset")}, true},
		{&trial.Error{Kind: trial.AgentError, Err: sandbox.Errorf(sandbox.ResourceExhausted, "slow down")}, true},
		{&trial.Error{Kind: trial.AgentTimeout, Err: sandbox.Errorf(sandbox.Unavailable, "x")}, false},
	} {
		if got := tc.err.Retryable(); got != tc.want {
			t.Errorf("%v: Retryable() = %v, want %v", tc.err, got, tc.want)
		}
	}
}
