package rollout

import (
	"context"

	"github.com/berth-sh/berth/harbor/agent"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/session"
)

// Agent is the kind of agent a rollout runs, given by the caller: it makes
// each trial's agent, pointed at the trial's own session. Package
// rollout/agents has berth's own (terminus and command); the rollout
// itself picks none.
type Agent interface {
	// Name is the agent's name, recorded as the job's agent.
	Name() string
	// Model is the model the agent names, the job's model unless
	// Config.Job.Model sets one.
	Model() string
	// New makes one trial's agent, talking to session s. Run calls it
	// once before any trial with a placeholder session, so that bad
	// options fail the run at once rather than once per trial.
	New(s Session) (TrialAgent, error)
}

// BackendChecker is an Agent that must see the job's backend before any
// trial runs (a harness in the sandbox that needs a way to its session).
// open opens the backend; the checker closes what it opened.
type BackendChecker interface {
	CheckBackend(ctx context.Context, open func(context.Context) (*sandbox.Provider, error)) error
}

// Session is the session one trial's agent talks to.
type Session struct {
	// Client is the session server's client: SessionURL(ID) and
	// PolicyBaseURL(ID) are the session's endpoints, APIKey its key.
	Client *session.Client
	ID     string
	// MaxSeqLen is Config.MaxSeqLen: the agent's context budget unless
	// its own options set one.
	MaxSeqLen int
}

// TrialAgent is a trial's agent: it reports what it did (model info,
// tokens, metadata), which lands in the trial's result.
type TrialAgent interface {
	agent.Agent
	agent.Reporter
}

// checkAgent fails on a bad agent configuration now, not once per trial:
// no agent, bad options, or a backend the agent cannot work with. It sets
// the job's agent and model from the agent.
func checkAgent(ctx context.Context, cfg *Config, opts Options) error {
	if cfg.Agent == nil {
		return sandbox.Errorf(sandbox.InvalidArgument, "a rollout needs an agent (Config.Agent)")
	}
	cfg.Job.Agent = cfg.Agent.Name()
	if cfg.Job.Model == "" {
		cfg.Job.Model = cfg.Agent.Model()
	}
	if _, err := cfg.Agent.New(Session{Client: opts.Sessions, ID: "check", MaxSeqLen: cfg.MaxSeqLen}); err != nil {
		return err
	}
	bc, ok := cfg.Agent.(BackendChecker)
	if !ok {
		return nil
	}
	return bc.CheckBackend(ctx, func(ctx context.Context) (*sandbox.Provider, error) {
		return opts.Registry.Open(ctx, cfg.Job.Backend, opts.Env, opts.Logger)
	})
}
