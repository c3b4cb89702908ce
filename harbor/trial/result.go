package trial

import "github.com/berth-sh/berth/results/layout"

// Result is a trial's result: its result.json (layout.TrialResult, whose
// fields it has) and what the runner knows beyond the file.
type Result struct {
	layout.TrialResult

	retryable bool
}

// Retryable reports whether the trial failed on infrastructure in a way
// that may pass if run again (see Error.Retryable).
func (r *Result) Retryable() bool { return r.retryable }
