package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/berth-sh/berth/harbor/agent/terminus"
	"github.com/berth-sh/berth/rollout"
	"github.com/berth-sh/berth/rollout/policy"
	"github.com/berth-sh/berth/session/testengine"
	"github.com/berth-sh/berth/session/tito"
)

// The connectors of berth rollout.
const (
	connectorHarbor = "harbor"
	connectorGym    = "nemo-gym"
)

// gymFlags are berth rollout's flags for --connector nemo-gym, and the
// in-process session server's addresses.
type gymFlags struct {
	connector, gymURL        string
	sessionAddr, externalURL string
	sampleTimeout            time.Duration
	topP                     float64
}

// gymOnly are the flags only the nemo-gym connector reads.
var gymOnly = []string{"gym-url", "sample-timeout", "top-p"}

// harborOnly are the flags only the harbor connector reads.
var harborOnly = []string{"agent", "env", "max-retries", "task-name", "exclude-task-name", "timeout-multiplier",
	"max-turns", "shell", "model", "model-retries"}

func (g *gymFlags) add(f *pflag.FlagSet) {
	f.StringVar(&g.connector, "connector", connectorHarbor, "harbor (Harbor trials, the terminus agent) or nemo-gym (POST /run to a NeMo Gym agent server)")
	f.StringVar(&g.gymURL, "gym-url", "", "--connector nemo-gym: the Gym agent server's base URL (e.g. http://gym-host:12000)")
	f.DurationVar(&g.sampleTimeout, "sample-timeout", rollout.DefaultGymSampleTimeout, "--connector nemo-gym: wall-clock limit of one sample's /run, retries included")
	f.Float64Var(&g.topP, "top-p", 0, "--connector nemo-gym: top_p sent in responses_create_params (default: Gym's)")
	f.StringVar(&g.sessionAddr, "session-addr", "127.0.0.1:0", "with --engine: where the in-process session server listens, host:port (beyond loopback, with a key made up for the run)")
	f.StringVar(&g.externalURL, "external-url", "", "the session server's URL as the harness reaches it (e.g. http://trainer-0:30000): Gym's policy_base_url, or -a command's endpoint where the sandbox has no reverse port")
}

// onlyGym refuses the nemo-gym flags on a Harbor rollout.
func (g *gymFlags) onlyGym(f *pflag.FlagSet) error {
	for _, n := range gymOnly {
		if f.Changed(n) {
			return usageError(fmt.Errorf("--%s is for --connector %s", n, connectorGym))
		}
	}
	return nil
}

// config is the Gym rollout the flags ask for, its sampling settings from
// the model flags (to); the Harbor flags it has no use for are refused.
func (g *gymFlags) config(f *pflag.FlagSet, cfg rollout.Config, to terminus.Options) (rollout.GymConfig, error) {
	for _, n := range harborOnly {
		if f.Changed(n) {
			return rollout.GymConfig{}, usageError(fmt.Errorf("--%s is for --connector %s (Gym runs its own harness and sandboxes)", n, connectorHarbor))
		}
	}
	if g.gymURL == "" {
		return rollout.GymConfig{}, usageError(fmt.Errorf("--connector %s needs --gym-url URL", connectorGym))
	}
	if g.sampleTimeout <= 0 {
		return rollout.GymConfig{}, usageError(fmt.Errorf("--sample-timeout must be positive"))
	}
	gc := rollout.GymConfig{URL: g.gymURL, TasksPath: cfg.Job.TasksPath, JobName: cfg.Job.JobName, JobsDir: cfg.Job.JobsDir,
		SamplesPerTask: cfg.Job.NAttempts, NConcurrent: cfg.Job.NConcurrent, NTasks: cfg.Job.NTasks,
		SampleTimeout: g.sampleTimeout, MaxSeqLen: cfg.MaxSeqLen, Strict: cfg.Strict}
	gc.Sampling.Temperature = to.Temperature
	if f.Changed("top-p") {
		p := g.topP
		gc.Sampling.TopP = &p
	}
	if n := to.MaxOutputTokens; n > 0 {
		gc.Sampling.MaxOutputTokens = &n
	}
	return gc, nil
}

// gymScripts are the test engines of Gym rollouts, in mini-swe-agent's
// format: test: echoes, test:golden runs each instance's "solution" field
// (berth's test extension), test:wrong solves nothing.
func gymScripts(tasksPath string) map[string]func(*tito.Codec) (testengine.Script, error) {
	return map[string]func(*tito.Codec) (testengine.Script, error){
		testEngineURL: func(*tito.Codec) (testengine.Script, error) { return testengine.Echo, nil },
		testEngineURL + "golden": func(*tito.Codec) (testengine.Script, error) {
			tasks, err := rollout.LoadGymTasks(tasksPath)
			if err != nil {
				return nil, err
			}
			var ins []policy.GymInstance
			for _, t := range tasks {
				sol := t.Field("solution")
				if strings.TrimSpace(sol) == "" {
					return nil, fmt.Errorf("%s, line %d: no \"solution\" for the golden policy", tasksPath, t.Line)
				}
				ins = append(ins, policy.GymInstance{ProblemStatement: t.Field("problem_statement"), Solution: sol})
			}
			return policy.GymGolden(ins), nil
		},
		testEngineURL + "wrong": func(*tito.Codec) (testengine.Script, error) { return policy.GymWrong, nil },
	}
}

func (a *app) runGymRollout(ctx context.Context, cfg rollout.GymConfig, sv sessionSetup, asJSON bool) error {
	if u, err := url.Parse(cfg.URL); err == nil && sv.url == "" && sv.external == "" && loopback(sv.addr) && !loopback(net.JoinHostPort(u.Hostname(), "0")) {
		fmt.Fprintf(a.stderr, "berth: warning: the session server listens on %s, which %s cannot reach; give --session-addr 0.0.0.0:PORT and --external-url http://THIS-HOST:PORT\n", sv.addr, u.Host)
	}
	ctx, stop := a.interruptible(ctx)
	defer stop()
	ss, err := a.sessions(ctx, sv)
	if err != nil {
		return err
	}
	defer ss.done()
	ev := a.eventSink(asJSON)
	res, err := rollout.RunGym(ctx, cfg, rollout.GymOptions{Sessions: ss.client, PolicyURL: ss.policyURL, TokenText: ss.tokenText, Events: ev.event})
	ev.close()
	return a.rolloutDone(res, err, asJSON)
}
