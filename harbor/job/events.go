package job

import (
	"context"
	"log/slog"
	"time"
)

// Event types, as they appear in `berth run --json` lines.
const (
	EventJobStarted    = "job_started"
	EventTrialStarted  = "trial_started"
	EventPhase         = "phase"
	EventTrialFinished = "trial_finished"
	EventJobFinished   = "job_finished"
)

// Event is one line of a job's progress.
type Event struct {
	Type      string    `json:"type"`
	Time      time.Time `json:"time"`
	Job       string    `json:"job"`
	Trial     string    `json:"trial,omitempty"`
	Task      string    `json:"task,omitempty"`
	Phase     string    `json:"phase,omitempty"`
	PhaseDone bool      `json:"phase_done,omitempty"`
	Seconds   float64   `json:"seconds,omitempty"`
	Reward    float64   `json:"reward,omitempty"`
	Exception string    `json:"exception,omitempty"`
	Error     string    `json:"error,omitempty"`
	Total     int       `json:"total,omitempty"`
	Done      int       `json:"done,omitempty"`
	Summary   *Summary  `json:"summary,omitempty"`
}

// fanout sends records to several handlers (job.log and the caller's).
type fanout []slog.Handler

func (f fanout) Enabled(ctx context.Context, l slog.Level) bool {
	for _, h := range f {
		if h.Enabled(ctx, l) {
			return true
		}
	}
	return false
}

func (f fanout) Handle(ctx context.Context, r slog.Record) error {
	for _, h := range f {
		if h.Enabled(ctx, r.Level) {
			_ = h.Handle(ctx, r.Clone())
		}
	}
	return nil
}

func (f fanout) WithAttrs(a []slog.Attr) slog.Handler {
	out := make(fanout, len(f))
	for i, h := range f {
		out[i] = h.WithAttrs(a)
	}
	return out
}

func (f fanout) WithGroup(name string) slog.Handler {
	out := make(fanout, len(f))
	for i, h := range f {
		out[i] = h.WithGroup(name)
	}
	return out
}
