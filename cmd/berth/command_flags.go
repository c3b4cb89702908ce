package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/berth-sh/berth/harbor/agent"
	"github.com/berth-sh/berth/harbor/agent/command"
	"github.com/berth-sh/berth/harbor/job"
)

// cmdFlags configure the command agent (a harness inside the sandbox).
type cmdFlags struct {
	agentCmd, externalURL string
}

func (c *cmdFlags) add(f *pflag.FlagSet, externalHelp string) {
	c.addAgentCmd(f)
	f.StringVar(&c.externalURL, "external-url", "", externalHelp)
}

// addAgentCmd adds --agent-cmd alone, for berth rollout, whose
// --external-url (the session server's, gymFlags) serves -a command too.
func (c *cmdFlags) addAgentCmd(f *pflag.FlagSet) {
	f.StringVar(&c.agentCmd, "agent-cmd", "", "-a command: the harness's command line, run with sh inside the sandbox (see above for its environment)")
}

// commandHelp is what both verbs say about -a command.
var commandHelp = fmt.Sprintf(`-a command --agent-cmd '...' runs a harness installed in the task's image
(mini-swe-agent, claude-code, any CLI) inside the sandbox, with sh, in the
task's working directory; its output lands in agent/command.txt, a non-zero
exit in agent/exit-code.txt, and the agent's timeout ends the trial as
AgentTimeoutError. Its environment points at the model endpoint:
OPENAI_API_BASE and OPENAI_BASE_URL (…/v1), OPENAI_API_KEY,
ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY, BERTH_MODEL (--model), and the
task's instruction as BERTH_INSTRUCTION and in $BERTH_INSTRUCTION_FILE.
On providers with the reverse port (local) the endpoint reaches the sandbox
at http://127.0.0.1:%d/v1 even on network none, through a relay on this
host that serves only the model API and holds the real key (the sandbox
gets a per-trial token). Elsewhere give --external-url, an address the
sandbox reaches on its own network; the key then goes into its
environment (it is scrubbed from agent/command.txt). A backend with
neither is refused before any sandbox is made.`, command.DefaultPort)

// hooks make berth run's trials' command agents when the agent is command
// (or, on --resume, when --agent-cmd is given); nil when it is not.
func (c *cmdFlags) hooks(ctx context.Context, a *app, cfg *job.Config, lf *llmFlags, resume bool) (job.Hooks, error) {
	isCommand := strings.EqualFold(strings.TrimSpace(cfg.Agent), command.Name)
	switch {
	case !isCommand && c.agentCmd == "" && c.externalURL == "":
		return nil, nil
	case !isCommand && !resume && c.agentCmd != "":
		return nil, usageError(fmt.Errorf("--agent-cmd is for -a command, not -a %s", cfg.Agent))
	case !isCommand && !resume:
		return nil, usageError(fmt.Errorf("--external-url is for -a command, not -a %s", cfg.Agent))
	case c.agentCmd == "":
		return nil, usageError(errors.New("-a command needs --agent-cmd '...' (the harness's command line in the sandbox)"))
	case lf.apiBase == "" && c.externalURL == "":
		return nil, usageError(errors.New("-a command needs --api-base URL (the model's OpenAI-compatible endpoint; --external-url where sandboxes reach it elsewhere)"))
	}
	lo, err := lf.options(a)
	if err != nil {
		return nil, err
	}
	if lf.apiBase == "" && lf.keyFile == "" {
		// Only the sandbox talks to the endpoint, at the external URL.
		lo.APIKey = strings.TrimSpace(a.env.Get("OPENAI_API_KEY"))
	}
	o := command.Options{Command: c.agentCmd, APIBase: lf.apiBase, APIKey: lo.APIKey, Model: lf.model, ExternalBase: c.externalURL}
	if o.APIBase == "" {
		o.APIBase = c.externalURL
	}
	if _, err := command.New(o); err != nil {
		return nil, usageError(err)
	}
	if !resume { // a resumed job's backend is in its directory; its trials say it
		if err := a.checkRoute(ctx, cfg.Backend, o); err != nil {
			return nil, err
		}
	}
	cfg.Agent, cfg.Model = command.Name, lf.model
	return job.AgentFunc(func(job.TrialInfo) (agent.Agent, error) { return command.New(o) }), nil
}

// checkRoute refuses a backend that can carry the endpoint into its
// sandboxes neither way, before any sandbox is made.
func (a *app) checkRoute(ctx context.Context, backend string, o command.Options) error {
	if o.ExternalBase != "" {
		return nil
	}
	p, err := a.reg.Open(ctx, backend, a.env, nil)
	if err != nil {
		return usageError(err)
	}
	defer p.Close()
	if err := command.CheckRoute(p.Name(), p.Capabilities(), o); err != nil {
		return usageError(err)
	}
	return nil
}
