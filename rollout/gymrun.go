package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/berth-sh/berth/harbor/job"
	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/internal/atomicfile"
	"github.com/berth-sh/berth/results/layout"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/errdefs"
	"github.com/berth-sh/berth/sandbox/retry"
)

// GymError is the exception type of a sample whose /run got no usable
// answer (transport errors or 5xx past the attempts, another non-2xx
// answer, a reply that is not Gym's).
const GymError trial.Kind = "NeMoGymError"

// GymReplyFile is the Gym agent server's /run answer, as it came, in the
// sample's directory.
const GymReplyFile = "gym_response.json"

// gymReply is what a sample takes from Gym's answer
// (MiniSWEAgentVerifyResponse); the rest stays in GymReplyFile.
type gymReply struct {
	Reward     *float64        `json:"reward"`
	Metadata   json.RawMessage `json:"metadata"`
	InstanceID string          `json:"instance_id"`
}

// gymEpisode is how a sample's /run calls went.
type gymEpisode struct {
	session  string // the last attempt's session; "" when none is open
	reply    *gymReply
	raw      []byte
	attempts int
	kind     trial.Kind // why there is no reply
	err      error
}

// sample runs one sample: a session, POST /run (retried), the samples
// collected and the session deleted whatever happened, then the trial
// directory written.
func (g *gymJob) sample(ctx context.Context, s gymSample) *trial.Result {
	name := gymTrialName(s.task, strings.ToLower(newID()[:7]))
	dir := filepath.Join(g.dir, name)
	r := &trial.Result{TrialResult: layout.TrialResult{ID: newID(), TaskName: gymTaskName(s.task), TrialName: name, TrialURI: "file://" + absPath(dir),
		Config: layout.TrialConfig{TaskPath: fmt.Sprintf("%s:%d", absPath(g.cfg.TasksPath), s.task.Line), TrialName: name,
			JobID: g.cfg.JobName, Agent: GymAgent, Environment: GymAgent, TimeoutMultiplier: 1, Attempt: s.attempt},
		AgentInfo: layout.AgentInfo{Name: GymAgent}, StartedAt: time.Now().UTC()}}
	tlog := io.Discard
	if err := os.MkdirAll(dir, 0o755); err != nil {
		g.log.Error("making a sample directory", "trial", name, "error", err)
	} else {
		_ = atomicfile.WriteJSON(filepath.Join(dir, layout.ConfigFile), r.Config)
		if f, err := os.Create(filepath.Join(dir, layout.TrialLogFile)); err == nil {
			defer f.Close()
			tlog = f
		}
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(tlog, "%s %s\n", time.Now().UTC().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
	}
	g.emit(job.Event{Type: job.EventTrialStarted, Trial: name, Task: r.TaskName})

	run := &layout.Timing{StartedAt: time.Now().UTC()}
	r.AgentExecution = run
	logf("%s: start", layout.PhaseAgent)
	sctx, cancel := context.WithTimeout(ctx, g.cfg.SampleTimeout)
	ep := g.episode(sctx, s, logf)
	timedOut := errors.Is(sctx.Err(), context.DeadlineExceeded)
	cancel()
	run.FinishedAt = time.Now().UTC()
	switch {
	case ep.err == nil:
	case ctx.Err() != nil:
		ep.kind, ep.err = trial.Cancelled, errors.New("the rollout was cancelled")
	case timedOut:
		ep.kind, ep.err = trial.AgentTimeout, fmt.Errorf("NeMo Gym /run gave no answer within %v (the sample timeout)", g.cfg.SampleTimeout)
	}
	info := g.outcome(r, ep)
	if ep.err != nil {
		logf("%s: %v", layout.PhaseAgent, ep.err)
	} else {
		logf("%s: done in %v", layout.PhaseAgent, run.Duration())
	}

	var sp *samplesPayload
	if ep.session != "" {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), collectTimeout)
		p, err := g.opts.Sessions.Samples(cctx, ep.session, g.cfg.MaxSeqLen)
		cancel()
		if err != nil && info.outcome.abortReason == "" {
			info.outcome.abortReason = "collecting the session's samples: " + err.Error()
		}
		sp = &samplesPayload{p: p, session: ep.session}
		deleteSession(ctx, g.opts.Sessions, ep.session, g.log)
	} else if info.outcome.abortReason == "" {
		info.outcome.abortReason = "no model session"
	}
	r.FinishedAt = time.Now().UTC()
	if ep.raw != nil {
		if err := atomicfile.Write(filepath.Join(dir, GymReplyFile), ep.raw, 0o644); err != nil {
			g.log.Error("writing the Gym reply", "trial", name, "error", err)
		}
	}
	if err := atomicfile.WriteJSON(filepath.Join(dir, layout.ResultFile), r); err != nil {
		g.log.Error("writing "+layout.ResultFile, "trial", name, "error", err)
	}
	if err := writeSamples(dir, sp, info, g.opts.TokenText); err != nil {
		g.log.Error("writing samples", "trial", name, "error", err)
	}
	ev := job.Event{Type: job.EventTrialFinished, Trial: name, Task: r.TaskName, Reward: r.Reward()}
	if e := r.ExceptionInfo; e != nil {
		ev.Exception, ev.Error = e.ExceptionType, e.ExceptionMessage
	}
	g.emit(ev)
	return r
}

// outcome fills the trial's result from the episode and says what its
// samples carry. A Gym answer is the verdict (reward, metadata as the eval
// report); an answer whose metadata has an error is Gym's failed episode,
// reward 0, samples kept as Miles keeps them. No answer is an exception
// and ABORTED samples.
func (g *gymJob) outcome(r *trial.Result, ep gymEpisode) sampleInfo {
	metrics := map[string]any{"gym_attempts": ep.attempts, "gym_seconds": r.AgentExecution.Duration().Seconds()}
	r.AgentResult.Metadata = metrics
	in := sampleInfo{evalReport: map[string]any{}, agentMetrics: metrics, trialName: r.TrialName, taskName: r.TaskName,
		attempt: r.Config.Attempt}
	if ep.err != nil {
		r.ExceptionInfo = &layout.ExceptionInfo{ExceptionType: string(ep.kind), ExceptionMessage: ep.err.Error(), OccurredAt: time.Now().UTC()}
		in.evalReport = map[string]any{"exception_type": string(ep.kind), "exception_message": ep.err.Error()}
		in.outcome = outcome{exitStatus: r.ExitStatus(), abortReason: string(ep.kind) + ": " + ep.err.Error()}
		if in.outcome.exitStatus == layout.ExitCancelled {
			in.outcome.exitStatus = AgentError
		}
		return in
	}
	if len(ep.reply.Metadata) > 0 && !isNull(ep.reply.Metadata) {
		in.evalReport = ep.reply.Metadata
	}
	if msg := gymErrorOf(ep.reply.Metadata); msg != "" {
		r.ExceptionInfo = &layout.ExceptionInfo{ExceptionType: string(trial.AgentError), ExceptionMessage: "NeMo Gym: " + msg, OccurredAt: time.Now().UTC()}
		in.outcome = outcome{exitStatus: AgentError}
		return in
	}
	if ep.reply.Reward != nil {
		in.reward = *ep.reply.Reward
	}
	r.VerifierResult = &layout.VerifierResult{Rewards: map[string]float64{"reward": in.reward}}
	in.outcome = outcome{exitStatus: Submitted}
	return in
}

// gymErrorOf is the error Gym's agent server reports in an answer's
// metadata ({error, traceback}), bounded; "" when there is none.
func gymErrorOf(md json.RawMessage) string {
	var e struct {
		Error any `json:"error"`
	}
	if json.Unmarshal(md, &e) != nil || e.Error == nil || e.Error == "" {
		return ""
	}
	return excerpt([]byte(fmt.Sprint(e.Error)))
}

// episode makes the sample's /run calls until one is answered, a failure
// is not worth another attempt, or ctx ends. Each attempt has a session of
// its own: one Gym gave up on may hold turns of an episode without a reward.
func (g *gymJob) episode(ctx context.Context, s gymSample, logf func(string, ...any)) gymEpisode {
	var ep gymEpisode
	p := retry.Policy{
		Attempts: g.cfg.Attempts, Base: g.cfg.BackoffMin, Max: g.cfg.BackoffMax,
		OnRetry: func(error, int, time.Duration) {
			deleteSession(ctx, g.opts.Sessions, ep.session, g.log)
			ep.session = ""
			g.count(func() { g.nRetry++ })
		},
	}
	_ = retry.Do(ctx, p, func(ctx context.Context) error { return g.try(ctx, s, &ep, logf) })
	return ep
}

// try is one attempt of an episode, recorded in ep: a fresh session and
// one /run. It returns the /run's failure for the retry to judge; a
// failure before the /run is Permanent (never retried).
func (g *gymJob) try(ctx context.Context, s gymSample, ep *gymEpisode, logf func(string, ...any)) error {
	ep.attempts++
	// Not cancelled half way: a session made on the server and never
	// heard of here would outlive the rollout.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), collectTimeout)
	id, err := g.opts.Sessions.Create(cctx)
	cancel()
	if err != nil {
		ep.kind, ep.err = trial.ModelError, fmt.Errorf("opening a session: %w", err)
		return sandbox.WithPermanent(ep.err)
	}
	ep.session = id
	if ctx.Err() != nil {
		ep.kind, ep.err = trial.Cancelled, ctx.Err()
		return sandbox.WithPermanent(ep.err)
	}
	body, err := s.task.runBody(g.cfg.Sampling, g.policy.PolicyBaseURL(id), g.opts.Sessions.APIKey)
	if err != nil {
		ep.kind, ep.err = GymError, fmt.Errorf("the request body: %w", err)
		return sandbox.WithPermanent(ep.err)
	}
	ep.reply, ep.raw, err = g.post(ctx, body)
	if err == nil {
		ep.kind, ep.err = "", nil
		return nil
	}
	ep.kind, ep.err = GymError, err
	logf("/run attempt %d of %d: %v", ep.attempts, g.cfg.Attempts, err)
	return err
}

// post makes one POST /run and reads its answer, bounded. Transport
// errors and 5xx answers are Unavailable (retried); any other non-2xx
// answer, a reply past the bound or one that is not Gym's is Permanent.
func (g *gymJob) post(ctx context.Context, body []byte) (*gymReply, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.runURL, bytes.NewReader(body))
	if err != nil {
		return nil, nil, sandbox.WithPermanent(sandbox.Classify(sandbox.InvalidArgument, err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	res, err := g.opts.HTTP.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, sandbox.Errorf(sandbox.Unavailable, "NeMo Gym /run: %w", err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, g.cfg.MaxReplyBytes+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, sandbox.Errorf(sandbox.Unavailable, "NeMo Gym /run: reading the answer: %w", err)
	}
	if int64(len(data)) > g.cfg.MaxReplyBytes {
		return nil, nil, sandbox.WithPermanent(sandbox.Errorf(sandbox.ResourceExhausted, "NeMo Gym /run: the answer is over %d bytes", g.cfg.MaxReplyBytes))
	}
	// What Gym says goes into errors, logs and files: never the session
	// server's key, which a server echoing its request (a 422 with the
	// body) would repeat.
	if k := g.opts.Sessions.APIKey; k != "" {
		data = bytes.ReplaceAll(data, []byte(k), []byte("[policy_api_key]"))
	}
	if res.StatusCode >= 500 {
		return nil, nil, sandbox.Errorf(sandbox.Unavailable, "NeMo Gym /run: %d: %s", res.StatusCode, excerpt(data))
	}
	if res.StatusCode/100 != 2 {
		return nil, nil, sandbox.WithPermanent(errdefs.HTTPError(res.StatusCode, nil, fmt.Errorf("NeMo Gym /run: %d: %s", res.StatusCode, excerpt(data))))
	}
	var rep gymReply
	if err := json.Unmarshal(data, &rep); err != nil {
		return nil, nil, sandbox.WithPermanent(sandbox.Errorf(sandbox.InvalidArgument, "NeMo Gym /run: the answer is not Gym's: %v", err))
	}
	if md := bytes.TrimSpace(rep.Metadata); len(md) > 0 && md[0] != '{' && !isNull(md) {
		return nil, nil, sandbox.WithPermanent(sandbox.Errorf(sandbox.InvalidArgument, "NeMo Gym /run: metadata is not an object"))
	}
	return &rep, data, nil
}

// excerpt is the start of what a server said, for an error message:
// valid UTF-8, control characters as spaces, at most 512 bytes.
func excerpt(b []byte) string {
	const n = 512
	cut := len(b) > n
	if cut {
		b = b[:n]
	}
	s := strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(string(b), ""))
	s = strings.TrimSpace(s)
	if cut {
		s += "..."
	}
	return s
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
