package rollout

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-sh/berth/harbor/agent"
	"github.com/berth-sh/berth/harbor/job"
	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/session"
)

// How a rollout stops early. Whatever ends it (Ctrl-C: the caller's
// context; Config.MaxSamples reached; a trainer's abort of the trial's
// session on the session server, Miles's agent abort hook), a trial that
// was still running is cancelled as a whole: its in-flight turn stops (the
// rollout aborts the trial's session at once, so the session server
// cancels the engine call and records nothing of it), its agent and
// verifier do not go on, its sandbox is torn down (trial teardown survives
// the cancel), and its samples are ABORTED with abort_reason
// "CancelledError: <what ended it>", the session server's samples of it
// too. Trials not yet started do not start.

// ErrMaxSamples is the cause of a rollout that stopped at MaxSamples; Run
// returns no error for it.
var ErrMaxSamples = errors.New("max samples reached")

// abortTimeout bounds telling the session server of a cancelled trial.
const abortTimeout = 30 * time.Second

// TrialContext implements job.TrialContexter: the trial's context ends
// when a trainer aborts its session; when it ends for any reason but the
// trial's own end, the session is aborted (its in-flight turn stops).
func (h *hooks) TrialContext(ctx context.Context, _ job.TrialInfo, ag agent.Agent) (context.Context, func()) {
	sa, ok := ag.(*sessionAgent)
	if !ok {
		return ctx, func() {}
	}
	tctx, cancel := context.WithCancelCause(ctx)
	// When the agent returns, an abort the watcher has not heard of yet
	// still ends the trial before its verifier: the agent may have
	// stopped because its turn was refused.
	sa.ended = func(ctx context.Context) {
		if reason, aborted, err := h.opts.Sessions.Aborted(context.WithoutCancel(ctx), sa.session); err == nil && aborted {
			cancel(&session.AbortedError{Reason: reason})
		}
	}
	var ended atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		reason, err := h.opts.Sessions.WaitAbort(tctx, sa.session)
		if err == nil {
			cancel(&session.AbortedError{Reason: reason})
			return
		}
		if tctx.Err() != nil && !ended.Load() {
			actx, stop := context.WithTimeout(context.WithoutCancel(tctx), abortTimeout)
			defer stop()
			// NotFound: Finished collected and deleted it first.
			if err := sandbox.IgnoreNotFound(h.opts.Sessions.Abort(actx, sa.session, cancelledReason(tctx))); err != nil && h.opts.Logger != nil {
				h.opts.Logger.Warn("aborting a cancelled trial's session", "session", sa.session, "error", err)
			}
		}
	}()
	return tctx, func() {
		ended.Store(true)
		cancel(nil)
		<-done
	}
}

// Run runs the trial's agent, then sees whether its session was aborted
// meanwhile.
func (a *sessionAgent) Run(ctx context.Context, env agent.Env) error {
	err := a.TrialAgent.Run(ctx, env)
	if a.ended != nil {
		a.ended(ctx)
	}
	return err
}

// cancelledReason is the abort reason of a trial cancelled under ctx: what
// its result says ("CancelledError: ..."), with the cause when there is
// one.
func cancelledReason(ctx context.Context) string {
	return (&trial.Error{Kind: trial.Cancelled, Err: context.Cause(ctx)}).Error()
}

// stopped counts the samples of finished trials and ends the rollout once
// MaxSamples of them are not ABORTED.
type stopped struct {
	max  int
	stop context.CancelCauseFunc
	mu   sync.Mutex
	n    int
}

func (s *stopped) add(n int) {
	if s.max <= 0 || n == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n += n; s.n >= s.max {
		s.stop(fmt.Errorf("%w: %d samples of %d collected", ErrMaxSamples, s.n, s.max))
	}
}

// cancelCause is why the trial's context ended, for its samples, when it
// has a reason of its own (max samples; a session abort): the trial's
// exception says only "context canceled", or names what failed because of
// it (an agent whose turn was refused).
func cancelCause(ctx context.Context, r *trial.Result) string {
	if ctx.Err() == nil || r.ExceptionInfo == nil || context.Cause(ctx) == ctx.Err() {
		return ""
	}
	return cancelledReason(ctx)
}
