package rollout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/berth-sh/berth/harbor/agent"
	"github.com/berth-sh/berth/harbor/job"
	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/internal/atomicfile"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/results/layout"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/session"
)

// Config is one rollout.
type Config struct {
	// Job is the Harbor job the rollout runs: tasks, backend, concurrency,
	// NAttempts (samples per task), retries, timeouts. Its Agent is
	// Agent's name, its Model Agent's model unless set.
	Job job.Config
	// Agent makes each trial's agent, pointed at the trial's session
	// (package rollout/agents: terminus or command).
	Agent Agent
	// MaxSeqLen, when set, is the samples' max_seq_len (turns past it are
	// cut, the sample TRUNCATED) and the agent's context budget unless
	// its own options set one (Session.MaxSeqLen).
	MaxSeqLen int
	// Strict fails the run when a gated TITO mismatch rate is not 0.
	Strict bool
	// MaxSamples, when above 0, ends the rollout once this many samples
	// that are not ABORTED are collected (Miles's oversampling abort): the
	// trials still running are cancelled, their samples ABORTED.
	MaxSamples int
}

// Options are what a rollout needs besides its Config.
type Options struct {
	Registry *registry.Registry
	Env      registry.Environ
	// Sessions is the session server's client (its BaseURL and key).
	Sessions *session.Client
	// TokenText, when set, gives token texts for samples.jsonl (the
	// session server's tokenizer).
	TokenText func(id int) string
	Events    func(job.Event)
	Logger    *slog.Logger
}

// Result is a finished rollout.
type Result struct {
	Job     *layout.JobResult
	Summary *job.Summary
	Rollout *Summary
}

// ErrStrict is a run whose gated TITO mismatch rates are not all 0.
var ErrStrict = errors.New("TITO strict gate failed")

// SummaryFile is the rollout's summary in the job directory.
const SummaryFile = "rollout.json"

// Run runs the rollout to the end (or until ctx is cancelled: running
// trials are torn down and their sessions deleted) and writes rollout.json.
func Run(ctx context.Context, cfg Config, opts Options) (*Result, error) {
	if opts.Sessions == nil || opts.Sessions.BaseURL == "" {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "a rollout needs a session server")
	}
	if err := checkAgent(ctx, &cfg, opts); err != nil {
		return nil, err
	}
	rctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	h := &hooks{cfg: cfg, opts: opts, enough: &stopped{max: cfg.MaxSamples, stop: stop}}
	jres, sum, err := job.Run(rctx, cfg.Job, job.Options{Registry: opts.Registry, Env: opts.Env, Events: opts.Events, Logger: opts.Logger, Hooks: h})
	if cause := context.Cause(rctx); ctx.Err() == nil && errors.Is(cause, ErrMaxSamples) {
		err = nil // the rollout has what it was asked for
	}
	if sum == nil {
		return nil, err
	}
	res := &Result{Job: jres, Summary: sum}
	rs, serr := summarize(sum.Dir, cfg.Strict)
	if serr != nil {
		return res, errors.Join(err, serr)
	}
	if cause := context.Cause(rctx); errors.Is(cause, ErrMaxSamples) {
		rs.Stopped = cause.Error()
	}
	res.Rollout = rs
	if werr := atomicfile.WriteJSON(filepath.Join(sum.Dir, SummaryFile), rs); werr != nil {
		err = errors.Join(err, werr)
	}
	if err == nil && len(rs.StrictFailures) > 0 {
		err = fmt.Errorf("%w: %v", ErrStrict, rs.StrictFailures)
	}
	return res, err
}

// hooks open a session per trial attempt and collect it after.
type hooks struct {
	cfg    Config
	opts   Options
	enough *stopped
}

// sessionAgent is the trial's agent with the session it talks to.
type sessionAgent struct {
	TrialAgent
	session string
	ended   func(context.Context) // after Run (TrialContext sets it)
}

// Agent implements job.Hooks: a new session and an agent pointed at it.
func (h *hooks) Agent(ctx context.Context, t job.TrialInfo) (agent.Agent, error) {
	id, err := h.opts.Sessions.Create(ctx)
	if err != nil {
		return nil, err
	}
	a, err := h.cfg.Agent.New(Session{Client: h.opts.Sessions, ID: id, MaxSeqLen: h.cfg.MaxSeqLen})
	if err != nil {
		h.deleteSession(ctx, id)
		return nil, err
	}
	return &sessionAgent{TrialAgent: a, session: id}, nil
}

// Finished implements job.Hooks: collect the samples, delete the session,
// write the samples with the trial's outcome. It does not depend on ctx:
// a cancelled rollout still closes its sessions.
func (h *hooks) Finished(ctx context.Context, t job.TrialInfo, ag agent.Agent, r *trial.Result) {
	o := outcomeOf(r)
	if reason := cancelCause(ctx, r); reason != "" {
		o.abortReason = reason
	}
	ctx = context.WithoutCancel(ctx)
	sa, _ := ag.(*sessionAgent)
	var p *samplesPayload
	if sa != nil {
		sctx, cancel := context.WithTimeout(ctx, collectTimeout)
		payload, err := h.opts.Sessions.Samples(sctx, sa.session, h.cfg.MaxSeqLen)
		cancel()
		if err != nil && o.abortReason == "" {
			o.abortReason = "collecting the session's samples: " + err.Error()
		}
		p = &samplesPayload{p: payload, session: sa.session}
		h.deleteSession(ctx, sa.session)
	} else if o.abortReason == "" {
		o.abortReason = "no model session"
	}
	if err := writeSamples(t.Dir, p, harborInfo(r, o), h.opts.TokenText); err != nil && h.opts.Logger != nil {
		h.opts.Logger.Error("writing samples", "trial", t.Name, "error", err)
	}
	if o.abortReason == "" && p != nil && p.p != nil && !r.Retryable() {
		h.enough.add(len(p.p.Samples))
	}
}

func (h *hooks) deleteSession(ctx context.Context, id string) {
	deleteSession(ctx, h.opts.Sessions, id, h.opts.Logger)
}

// deleteSession deletes a session, whatever ctx says: teardown survives a
// cancel.
func deleteSession(ctx context.Context, c *session.Client, id string, log *slog.Logger) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), collectTimeout)
	defer cancel()
	if err := sandbox.IgnoreNotFound(c.Delete(dctx, id)); err != nil && log != nil {
		log.Warn("deleting a session", "session", id, "error", err)
	}
}
