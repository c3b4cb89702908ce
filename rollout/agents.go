package rollout

import (
	"context"
	"strings"

	"github.com/berth-sh/berth/harbor/agent/command"
	"github.com/berth-sh/berth/harbor/agent/terminus"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/session"
)

// Agents names the agents a rollout runs.
var Agents = []string{terminus.Name, command.Name}

// check fills cfg's defaults and fails on a bad agent configuration now,
// not once per trial: an unknown agent, bad options, or a command agent
// whose endpoint cannot reach the backend's sandboxes.
func check(ctx context.Context, cfg *Config, opts Options) error {
	if cfg.Job.Agent == "" {
		cfg.Job.Agent = terminus.Name
	}
	if cfg.Terminus.ContextTokens == 0 {
		cfg.Terminus.ContextTokens = cfg.MaxSeqLen
	}
	switch cfg.Job.Agent {
	case terminus.Name:
		if cfg.Job.Model == "" {
			cfg.Job.Model = cfg.Terminus.Model
		}
	case command.Name:
		if cfg.Job.Model == "" {
			cfg.Job.Model = cfg.Command.Model
		}
		if cfg.ExternalURL != "" {
			u, err := session.ExternalURL(cfg.ExternalURL)
			if err != nil {
				return sandbox.Errorf(sandbox.InvalidArgument, "%v", err)
			}
			cfg.ExternalURL = u
		}
	default:
		return sandbox.Errorf(sandbox.InvalidArgument, "agent %q cannot run a rollout (known: %s)", cfg.Job.Agent, strings.Join(Agents, ", "))
	}
	if _, err := newAgent(*cfg, opts.Sessions, "check"); err != nil {
		return err
	}
	if cfg.Job.Agent == command.Name && cfg.ExternalURL == "" {
		// Whether the backend has the reverse port: its capabilities.
		p, err := opts.Registry.Open(ctx, cfg.Job.Backend, opts.Env, opts.Logger)
		if err != nil {
			return err
		}
		defer p.Close()
		if err := command.CheckRoute(p.Name(), p.Capabilities(), command.Options{}); err != nil {
			return err
		}
	}
	return nil
}

// newAgent makes the trial's agent, talking to session id.
func newAgent(cfg Config, c *session.Client, id string) (reportingAgent, error) {
	if cfg.Job.Agent == command.Name {
		o := cfg.Command
		o.APIBase, o.APIKey = c.PolicyBaseURL(id), c.APIKey
		if cfg.ExternalURL != "" {
			o.ExternalBase = cfg.ExternalURL + "/sessions/" + id + "/v1"
		}
		return command.New(o)
	}
	o := cfg.Terminus
	o.APIBase, o.APIKey = c.SessionURL(id), c.APIKey
	return terminus.New(o)
}
