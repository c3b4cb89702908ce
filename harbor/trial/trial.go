package trial

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/berth-sh/berth/harbor/agent"
	"github.com/berth-sh/berth/harbor/task"
	"github.com/berth-sh/berth/internal/atomicfile"
	"github.com/berth-sh/berth/results/layout"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/throttle"
)

// DefaultAgentSetupTimeout is Harbor's agent setup limit.
const DefaultAgentSetupTimeout = 360 * time.Second

// Label keys every trial sandbox carries, so that `berth sandboxes reap
// --label berth.job=<id>` finds a crashed job's leftovers.
const (
	LabelJob      = "berth.job"
	LabelTrial    = "berth.trial"
	LabelTask     = "berth.task"
	LabelLauncher = "berth.launcher"
)

// Options configure one trial.
type Options struct {
	Task      *task.Task
	Provider  *sandbox.Provider
	Agent     agent.Agent
	Dir       string // the trial directory; created
	TrialName string // <task[:32]>__<id>
	ID        string // unique id of this trial
	JobID     string
	Attempt   int

	Timeouts  Timeouts
	Overrides Overrides
	// TTLMargin is how long the sandbox may outlive the trial's own time
	// limits before the provider removes it (the registry entry's value).
	TTLMargin time.Duration
	// TTL, when set, is the sandbox's lifetime instead of the one derived
	// from the limits; shorter than the trial needs is refused.
	TTL      time.Duration
	NoDelete bool
	// Gate, when set, admits the sandbox create (quotas, rate, retries).
	Gate *throttle.Gate
	// Events, when set, is told when phases start and end. It must not block.
	Events func(Event)
	// MaxDownloadBytes bounds the bytes of the log trees the trial
	// downloads from its sandbox (agent/ and verifier/ together); 0 is
	// DefaultMaxDownloadBytes, negative is no limit.
	MaxDownloadBytes int64
}

// Timeouts scale the task's limits. Zero multipliers mean 1 (or Multiplier
// for the per-phase ones).
type Timeouts struct {
	Multiplier                                           float64
	Agent, Verifier, AgentSetup, EnvironmentBuild        float64
	AgentOverride, VerifierOverride, EnvironmentOverride time.Duration
	AgentSetupDefault                                    time.Duration
}

// Overrides replace the task's resources when non-zero.
type Overrides struct {
	CPUs      float64
	MemoryMB  int
	StorageMB int
}

// Event reports progress of a trial.
type Event struct {
	Trial    string
	Phase    string
	Done     bool
	Duration time.Duration
	Err      error
}

type run struct {
	o          Options
	res        *Result
	log        *os.File
	sb         *sandbox.Sandbox
	release    func() // frees the gate's live slot after teardown
	downloaded int64  // bytes of files downloaded so far
}

// Run runs the trial to the end and returns its result, which is also
// written to <Dir>/result.json. It never panics on a bad task or provider;
// failures are in Result.ExceptionInfo. Teardown runs even when ctx is
// cancelled.
func Run(ctx context.Context, o Options) *Result {
	r := &run{o: o, res: &Result{TrialResult: layout.TrialResult{
		ID:        o.ID,
		TaskName:  o.Task.Name,
		TrialName: o.TrialName,
		TrialURI:  "file://" + o.Dir,
		StartedAt: time.Now().UTC(),
		Provider:  o.Provider.Name(),
		AgentInfo: layout.AgentInfo{Name: o.Agent.Name(), Version: o.Agent.Version()},
		Config:    r0config(o),
	}}}
	if err := os.MkdirAll(filepath.Join(o.Dir, layout.AgentDir), 0o755); err == nil {
		_ = os.MkdirAll(filepath.Join(o.Dir, layout.VerifierDir), 0o755)
		r.log, _ = os.Create(filepath.Join(o.Dir, layout.TrialLogFile))
	}
	sum, err := Checksum(o.Task.Dir)
	if err == nil {
		r.res.TaskChecksum = sum
	}
	_ = atomicfile.WriteJSON(filepath.Join(o.Dir, layout.ConfigFile), r.res.Config)

	r.phases(ctx)
	r.teardown(ctx)

	r.res.FinishedAt = time.Now().UTC()
	if r.res.ExceptionInfo != nil {
		_ = os.WriteFile(filepath.Join(o.Dir, layout.ExceptionFile), []byte(r.res.ExceptionInfo.ExceptionType+": "+r.res.ExceptionInfo.ExceptionMessage+"\n"), 0o644)
	}
	if err := atomicfile.WriteJSON(filepath.Join(o.Dir, layout.ResultFile), r.res); err != nil {
		r.logf("writing %s: %v", layout.ResultFile, err)
	}
	if r.log != nil {
		_ = r.log.Close()
	}
	return r.res
}

func r0config(o Options) layout.TrialConfig {
	return layout.TrialConfig{
		TaskPath:          o.Task.Dir,
		TrialName:         o.TrialName,
		JobID:             o.JobID,
		Agent:             o.Agent.Name(),
		Environment:       o.Provider.Name(),
		TimeoutMultiplier: mult(o.Timeouts.Multiplier),
		OverrideCPUs:      o.Overrides.CPUs,
		OverrideMemoryMB:  o.Overrides.MemoryMB,
		OverrideStorageMB: o.Overrides.StorageMB,
		NoDelete:          o.NoDelete,
		Attempt:           o.Attempt,
	}
}

func mult(m float64) float64 {
	if m <= 0 {
		return 1
	}
	return m
}

func (r *run) logf(format string, args ...any) {
	if r.log != nil {
		fmt.Fprintf(r.log, "%s %s\n", time.Now().UTC().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
	}
}

// phase times fn under the phase's name and reports it.
func (r *run) phase(name string, timing **layout.Timing, fn func() error) error {
	t := &layout.Timing{StartedAt: time.Now().UTC()}
	if timing != nil {
		*timing = t
	}
	r.event(Event{Phase: name})
	r.logf("%s: start", name)
	err := fn()
	t.FinishedAt = time.Now().UTC()
	if err != nil {
		r.logf("%s: %v", name, err)
	} else {
		r.logf("%s: done in %v", name, t.Duration())
	}
	r.event(Event{Phase: name, Done: true, Duration: t.Duration(), Err: err})
	return err
}

func (r *run) event(e Event) {
	if r.o.Events != nil {
		e.Trial = r.o.TrialName
		r.o.Events(e)
	}
}

// record keeps the first failure as the trial's exception.
func (r *run) record(err error) {
	if err == nil || r.res.ExceptionInfo != nil {
		return
	}
	var typed *Error
	r.res.retryable = errors.As(err, &typed) && typed.Retryable()
	r.res.ExceptionInfo = &layout.ExceptionInfo{
		ExceptionType:    string(KindOf(err)),
		ExceptionMessage: err.Error(),
		OccurredAt:       time.Now().UTC(),
	}
}

func (r *run) phases(ctx context.Context) {
	if err := r.o.Task.Err(); err != nil {
		r.record(&Error{Kind: InvalidTask, Err: err})
		return
	}
	if err := r.phase(layout.PhaseEnvironment, &r.res.EnvironmentSetup, func() error { return r.startEnvironment(ctx) }); err != nil {
		r.record(err)
		return
	}
	env := agent.Env{Sandbox: r.sb, Task: r.o.Task}
	err := r.phase(layout.PhaseAgentSetup, &r.res.AgentSetup, func() error {
		return timed(ctx, r.agentSetupTimeout(), AgentSetupTimeout, AgentError, func(ctx context.Context) error {
			return r.o.Agent.Setup(ctx, env)
		})
	})
	if err != nil {
		r.record(err)
		return
	}
	err = r.phase(layout.PhaseAgent, &r.res.AgentExecution, func() error {
		return timed(ctx, r.agentTimeout(), AgentTimeout, AgentError, func(ctx context.Context) error {
			return r.o.Agent.Run(ctx, env)
		})
	})
	var exit *agent.ExitError
	if errors.As(err, &exit) {
		// A failing solution is an answer, not an infrastructure error.
		_ = os.WriteFile(filepath.Join(r.o.Dir, layout.AgentDir, "exit-code.txt"), fmt.Appendf(nil, "%d\n", exit.Code), 0o644)
		err = nil
	}
	r.record(err)
	r.download(ctx, agent.AgentLogs, layout.AgentDir)
	r.report()
	if ctx.Err() != nil {
		r.record(&Error{Kind: Cancelled, Err: ctx.Err()})
		return
	}
	// Verification runs after an agent failure too: the reward is the truth.
	err = r.phase(layout.PhaseVerifier, &r.res.Verifier, func() error { return r.verify(ctx) })
	r.record(err)
}

// timed runs fn under a timeout and types its failure: a passed deadline is
// timeoutKind, a cancelled parent is Cancelled, anything else otherKind.
func timed(ctx context.Context, limit time.Duration, timeoutKind, otherKind Kind, fn func(context.Context) error) error {
	pctx := ctx
	if limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	err := fn(ctx)
	if err == nil {
		return nil
	}
	var typed *Error
	var exit *agent.ExitError
	var sbErr *agent.SandboxError
	var modelErr *agent.ModelError
	switch {
	case errors.As(err, &typed), errors.As(err, &exit):
		return err
	case pctx.Err() != nil:
		return &Error{Kind: Cancelled, Err: pctx.Err()}
	case ctx.Err() == context.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, sandbox.ErrDeadlineExceeded):
		return &Error{Kind: timeoutKind, Err: fmt.Errorf("exceeded %v: %w", limit, err)}
	case errors.Is(err, agent.ErrContextLength):
		return &Error{Kind: ContextLengthExceeded, Err: err}
	case errors.As(err, &sbErr):
		return &Error{Kind: EnvironmentError, Err: err}
	case errors.As(err, &modelErr):
		return &Error{Kind: ModelError, Err: err}
	}
	return &Error{Kind: otherKind, Err: err}
}

func (r *run) teardown(ctx context.Context) {
	if r.sb == nil {
		return
	}
	if r.release != nil {
		defer r.release()
	}
	_ = r.phase(layout.PhaseTeardown, &r.res.Teardown, func() error {
		defer r.sb.Close()
		if r.o.NoDelete {
			r.logf("teardown: --no-delete, sandbox %s left running until its TTL", r.sb.ID())
			return nil
		}
		// Sandbox.Delete survives ctx's cancellation by itself.
		return sandbox.IgnoreNotFound(r.sb.Delete(ctx))
	})
}
