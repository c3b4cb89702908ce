package agents

import (
	"context"

	"github.com/berth-sh/berth/harbor/agent/command"
	"github.com/berth-sh/berth/harbor/agent/terminus"
	"github.com/berth-sh/berth/rollout"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/session"
)

// Terminus is the terminus agent with options o; the endpoint and key
// are each trial's session's, and a zero o.ContextTokens is the rollout's
// MaxSeqLen.
func Terminus(o terminus.Options) rollout.Agent { return terminusAgent{o: o} }

type terminusAgent struct{ o terminus.Options }

var (
	_ rollout.Agent          = terminusAgent{}
	_ rollout.BackendChecker = commandAgent{}
)

func (a terminusAgent) Name() string  { return terminus.Name }
func (a terminusAgent) Model() string { return a.o.Model }

func (a terminusAgent) New(s rollout.Session) (rollout.TrialAgent, error) {
	o := a.o
	if o.ContextTokens == 0 {
		o.ContextTokens = s.MaxSeqLen
	}
	o.APIBase, o.APIKey = s.Client.SessionURL(s.ID), s.Client.APIKey
	return terminus.New(o)
}

// Command is the command agent with options o (its Command and Model);
// its endpoint is each trial's session, through the reverse port, or,
// when externalURL is set, through externalURL/sessions/<id>/v1
// (externalURL is the session server's base URL as sandboxes reach it, as
// the session server's --external-url).
func Command(o command.Options, externalURL string) (rollout.Agent, error) {
	a := commandAgent{o: o}
	if externalURL != "" {
		u, err := session.ExternalURL(externalURL)
		if err != nil {
			return nil, sandbox.Errorf(sandbox.InvalidArgument, "%v", err)
		}
		a.external = u
	}
	return a, nil
}

type commandAgent struct {
	o        command.Options
	external string
}

func (a commandAgent) Name() string  { return command.Name }
func (a commandAgent) Model() string { return a.o.Model }

func (a commandAgent) New(s rollout.Session) (rollout.TrialAgent, error) {
	o := a.o
	o.APIBase, o.APIKey = s.Client.PolicyBaseURL(s.ID), s.Client.APIKey
	if a.external != "" {
		o.ExternalBase = a.external + "/sessions/" + s.ID + "/v1"
	}
	return command.New(o)
}

// CheckBackend refuses a backend whose sandboxes cannot reach the
// session: without an external URL, one without the reverse port.
func (a commandAgent) CheckBackend(ctx context.Context, open func(context.Context) (*sandbox.Provider, error)) error {
	if a.external != "" {
		return nil
	}
	p, err := open(ctx)
	if err != nil {
		return err
	}
	defer p.Close()
	return command.CheckRoute(p.Name(), p.Capabilities(), command.Options{})
}
