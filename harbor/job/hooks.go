package job

import (
	"context"

	"github.com/berth-sh/berth/harbor/agent"
	"github.com/berth-sh/berth/harbor/task"
	"github.com/berth-sh/berth/harbor/trial"
)

// Hooks wrap each trial attempt of a job: what a rollout needs around a
// trial (a model session opened for its agent, samples collected after),
// and what an agent with its own configuration (a model endpoint) needs to
// be made. Both are called from the job's workers, concurrently.
type Hooks interface {
	// Agent makes the agent of one trial attempt. An error fails the
	// attempt at agent setup, retried when its class is transient.
	Agent(ctx context.Context, t TrialInfo) (agent.Agent, error)
	// Finished is told an attempt's result once result.json is written and
	// its sandbox is torn down, before the job decides on a retry (the
	// directory of an attempt that is retried is removed after). ctx may be
	// cancelled; cleanup that must happen should not depend on it.
	Finished(ctx context.Context, t TrialInfo, ag agent.Agent, r *trial.Result)
}

// TrialContexter, when a job's Hooks implement it, gives each trial
// attempt a context of its own, derived from the job's, that the hooks may
// end (a rollout ends the trial whose session a trainer aborted): the
// trial runs, and Finished is told, under it; stop is called after
// Finished.
type TrialContexter interface {
	TrialContext(ctx context.Context, t TrialInfo, ag agent.Agent) (tctx context.Context, stop func())
}

// TrialInfo names one trial attempt.
type TrialInfo struct {
	Name    string // <task>__<id>, the directory's name
	Dir     string // the trial directory
	Task    *task.Task
	Attempt int // from 1, of the task's -k attempts
	Try     int // from 0, retries of this attempt after infrastructure failures
}

func (j *Job) agentFor(ctx context.Context, info TrialInfo) agent.Agent {
	if j.opts.Hooks == nil {
		ag, _ := agent.New(j.cfg.Agent) // checked when the job started
		return ag
	}
	ag, err := j.opts.Hooks.Agent(ctx, info)
	if err != nil {
		return failedAgent{name: j.cfg.Agent, err: err}
	}
	return ag
}

// failedAgent stands in for an agent that could not be made: the trial
// records the failure at agent setup, after the sandbox started, with the
// phases and teardown of any other trial.
type failedAgent struct {
	name string
	err  error
}

func (f failedAgent) Name() string                           { return f.name }
func (f failedAgent) Version() string                        { return "" }
func (f failedAgent) Setup(context.Context, agent.Env) error { return f.err }
func (f failedAgent) Run(context.Context, agent.Env) error   { return f.err }

// AgentFunc makes each trial's agent with a function (an agent with its
// own configuration, such as a model endpoint) and needs nothing after.
type AgentFunc func(TrialInfo) (agent.Agent, error)

// Agent implements Hooks.
func (f AgentFunc) Agent(_ context.Context, t TrialInfo) (agent.Agent, error) { return f(t) }

// Finished implements Hooks.
func (AgentFunc) Finished(context.Context, TrialInfo, agent.Agent, *trial.Result) {}
