package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/berth-sh/berth/harbor/agent"
	"github.com/berth-sh/berth/harbor/agent/terminus"
	"github.com/berth-sh/berth/harbor/job"
)

// llmFlags configure the terminus agent: its endpoint (berth run) and its
// conduct (berth run and berth rollout).
type llmFlags struct {
	f                                        *pflag.FlagSet
	apiBase, model, keyFile, shell           string
	maxTurns, contextTokens, maxOutput, retr int
	temperature                              float64
}

func (l *llmFlags) add(f *pflag.FlagSet, endpoint bool) {
	l.f = f
	if endpoint {
		f.StringVar(&l.apiBase, "api-base", "", "-a terminus: the model's OpenAI-compatible base URL (e.g. http://127.0.0.1:8000/v1)")
		f.StringVar(&l.keyFile, "api-key-file", "", "-a terminus: file holding the endpoint's API key (default $OPENAI_API_KEY)")
		f.IntVar(&l.contextTokens, "max-context-tokens", 0, "-a terminus: the model's context budget in tokens; a reply cut there ends the trial as ContextLengthExceededError")
	}
	f.StringVar(&l.model, "model", "", "-a terminus: the model name sent to the endpoint")
	f.IntVar(&l.maxTurns, "max-turns", 100, "-a terminus: model calls per trial at most")
	f.IntVar(&l.maxOutput, "max-output-tokens", 0, "-a terminus: tokens per reply at most (0: the endpoint's limit)")
	f.Float64Var(&l.temperature, "temperature", 0, "-a terminus: sampling temperature (default: the endpoint's)")
	f.StringVar(&l.shell, "shell", "auto", "-a terminus: auto (tmux when the sandbox has it), tmux or pipe")
	f.IntVar(&l.retr, "model-retries", 0, "-a terminus: retries of a model call after 429 or 5xx (default 4)")
}

// options are the agent's options; the endpoint's key is read here and
// goes nowhere but the agent's requests.
func (l *llmFlags) options(a *app) (terminus.Options, error) {
	o := terminus.Options{APIBase: l.apiBase, Model: l.model, MaxTurns: l.maxTurns, ContextTokens: l.contextTokens,
		MaxOutputTokens: l.maxOutput, Shell: l.shell, MaxRetries: l.retr}
	if l.f != nil && l.f.Changed("temperature") {
		t := l.temperature
		o.Temperature = &t
	}
	if l.keyFile != "" {
		b, err := os.ReadFile(a.env.ExpandHome(l.keyFile))
		if err != nil {
			return o, usageError(fmt.Errorf("--api-key-file: %w", err))
		}
		o.APIKey = strings.TrimSpace(string(b))
		if o.APIKey == "" {
			return o, usageError(fmt.Errorf("--api-key-file %s is empty", l.keyFile))
		}
	} else if l.apiBase != "" {
		o.APIKey = strings.TrimSpace(a.env.Get("OPENAI_API_KEY"))
	}
	return o, nil
}

// hooks make berth run's trials' agents when the agent is terminus (or,
// on --resume, when --api-base is given).
func (l *llmFlags) hooks(a *app, cfg *job.Config, resume bool) (job.Hooks, error) {
	isTerminus := strings.EqualFold(strings.TrimSpace(cfg.Agent), terminus.Name)
	switch {
	case isTerminus && l.apiBase == "":
		return nil, usageError(errors.New("-a terminus needs --api-base URL (the model's OpenAI-compatible endpoint)"))
	case l.apiBase == "":
		return nil, nil
	case !isTerminus && !resume:
		return nil, usageError(fmt.Errorf("--api-base is for -a terminus, not -a %s", cfg.Agent))
	}
	o, err := l.options(a)
	if err != nil {
		return nil, err
	}
	if _, err := terminus.New(o); err != nil {
		return nil, usageError(err)
	}
	cfg.Agent, cfg.Model = terminus.Name, l.model
	return job.AgentFunc(func(job.TrialInfo) (agent.Agent, error) { return terminus.New(o) }), nil
}
