package smoke

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/berth-sh/berth/harbor/agent"
	"github.com/berth-sh/berth/harbor/task"
	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/internal/httpserve"
	"github.com/berth-sh/berth/openenv"
	"github.com/berth-sh/berth/openenv/insandbox"
	"github.com/berth-sh/berth/openenv/tbench2"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/sandbox"
)

// runOpenEnv runs the golden episode through the OpenEnv protocol: an
// in-process hosted tbench2 server over prov (LayoutHosted), or the server
// in the task's sandbox reached through its Endpoint (LayoutSandbox, the
// sandbox's creation and the server's start timed as sandbox create), and
// a client that resets to
// the task, pushes and runs solve.sh through exec actions (as Miles'
// scan_golden does), evaluates and closes. The phases are timed as the
// harbor connector times its own.
func runOpenEnv(ctx context.Context, o Options, entry registry.Entry, prov *sandbox.Provider, t *task.Task) (*Report, error) {
	rep := &Report{Connector: "openenv", Backend: entry.Name, Task: t.Name, Agent: o.Agent}
	if o.TaskDir == "" {
		rep.Task += " (built-in)"
	}
	copts := clientOptions(t)
	copts.HTTPClient = o.EndpointClient
	ep := &oeEpisode{rep: rep}
	switch o.Layout {
	case LayoutHosted:
		url, stop, err := startOpenEnv(t, entry, prov, 0)
		if err != nil {
			return nil, err
		}
		defer stop()
		if ep.client, err = openenv.NewClient(url, copts); err != nil {
			return nil, err
		}
	case LayoutSandbox:
		rep.Connector += " (in the sandbox)"
		ep.launch = func(pctx context.Context) error {
			e, err := insandbox.Launch(pctx, insandbox.LaunchOptions{
				Provider: prov, Task: t, AgentBinary: o.AgentBinary, Port: o.Port, CommandTimeout: t.AgentTimeout,
				TTLMargin: entry.TTLMargin, Labels: map[string]string{trial.LabelJob: "smoke"}, HTTPClient: o.EndpointClient,
			})
			if err != nil {
				return err
			}
			ep.inSandbox, rep.SandboxID = e, e.Sandbox.ID()
			kctx, stop := context.WithCancel(ctx) // the episode's, not the phase's
			ep.stopKeep = stop
			go func() { _ = e.Keep(kctx, nil) }() // the TTL re-armed while the episode runs
			ep.client, err = e.Client(copts)
			return err
		}
		defer func() {
			if ep.inSandbox != nil {
				ep.stopKeep()
				_ = ep.inSandbox.Close(ctx) // the sandbox goes, however the episode ended
			}
		}()
	default:
		return nil, &UsageError{fmt.Errorf("unknown openenv layout %q (hosted, sandbox)", o.Layout)}
	}
	start := time.Now()
	ep.run(ctx, o, prov, t)
	ep.phase("teardown", 0, func(ctx context.Context) error {
		var err error
		if ep.client != nil {
			err = ep.client.Close()
		}
		if ep.inSandbox != nil {
			ep.stopKeep()
			err = errors.Join(err, ep.inSandbox.Close(ctx))
		}
		return err
	}, ctx)
	rep.Total = time.Since(start)
	rep.TotalSec = rep.Total.Seconds()
	rep.Pass = rep.Reward == 1.0 && rep.ExitStatus == Submitted
	return rep, nil
}

// startOpenEnv serves the hosted tbench2 environment over prov for t's
// task directory on a loopback port, at most maxEnvs sessions at once (0:
// the server's default); stop closes the server and deletes the sandboxes
// of sessions still open.
func startOpenEnv(t *task.Task, entry registry.Entry, prov *sandbox.Provider, maxEnvs int) (base string, stop func(), err error) {
	factory, err := tbench2.NewFactory(tbench2.Options{
		Provider: prov, TasksDir: filepath.Dir(t.Dir), CommandTimeout: t.AgentTimeout, TTLMargin: entry.TTLMargin,
		Labels: map[string]string{trial.LabelJob: "smoke"}, MaxSessions: maxEnvs,
	})
	if err != nil {
		return "", nil, err
	}
	srv, err := openenv.New(openenv.Options{Factory: factory, Info: tbench2.Info(), MaxConcurrentEnvs: maxEnvs})
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs := httpserve.Start(ln, srv, 0)
	return "http://" + ln.Addr().String(), func() {
		_ = srv.Close()
		_ = hs.Close()
	}, nil
}

// clientOptions let a message take as long as the task's longest phase.
func clientOptions(t *task.Task) openenv.ClientOptions {
	wait := max(t.BuildTimeout, t.AgentTimeout, t.VerifierTimeout)
	if wait <= 0 {
		wait = time.Hour
	}
	return openenv.ClientOptions{MessageTimeout: wait + time.Minute}
}

// newOpenEnvClient is a client of a hosted server at base for t.
func newOpenEnvClient(base string, t *task.Task) (*openenv.Client, error) {
	return openenv.NewClient(base, clientOptions(t))
}

// oeEpisode is the client's side of one golden episode.
type oeEpisode struct {
	rep    *Report
	client *openenv.Client
	// launch, in the sandbox layout, starts the sandbox and its server
	// (timed as sandbox create, with the reset).
	launch    func(context.Context) error
	inSandbox *insandbox.Env
	stopKeep  context.CancelFunc
}

// phase times fn under limit (0: none) and records it; a passed limit
// marks the episode TimeLimitExceeded.
func (ep *oeEpisode) phase(name string, limit time.Duration, fn func(context.Context) error, ctx context.Context) error {
	if limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	start := time.Now()
	err := fn(ctx)
	d := time.Since(start)
	ep.rep.Phases = append(ep.rep.Phases, Phase{Name: name, Duration: d, Seconds: d.Seconds(), Ran: true})
	if err != nil && ep.rep.Exception == "" {
		ep.rep.Exception, ep.rep.Message = "AgentError", err.Error()
		ep.rep.ExitStatus = AgentError
		if ctx.Err() == context.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded) {
			ep.rep.Exception, ep.rep.ExitStatus = "TimeLimitExceeded", TimeLimitExceeded
			ep.rep.Message = fmt.Sprintf("%s exceeded %v: %v", name, limit, err)
		}
	}
	return err
}

func (ep *oeEpisode) skip(names ...string) {
	for _, n := range names {
		ep.rep.Phases = append(ep.rep.Phases, Phase{Name: n})
	}
}

func (ep *oeEpisode) run(ctx context.Context, o Options, prov *sandbox.Provider, t *task.Task) {
	err := ep.phase("image resolution", t.BuildTimeout, func(ctx context.Context) error {
		return prov.PrepareImage(ctx, trial.TaskSpec(t, trial.Overrides{}))
	}, ctx)
	if err != nil {
		ep.skip("sandbox create", "exec", "verifier")
		return
	}
	ep.episode(ctx, o, t)
}

// episode is the golden episode once the image is resolved: reset (the
// sandbox's create, after the in-sandbox server's launch), the agent's
// exec actions, evaluate.
func (ep *oeEpisode) episode(ctx context.Context, o Options, t *task.Task) {
	err := ep.phase("sandbox create", t.BuildTimeout, func(ctx context.Context) error {
		if ep.launch != nil {
			if err := ep.launch(ctx); err != nil {
				return err
			}
		}
		r, err := ep.client.Reset(ctx, map[string]any{"task_id": filepath.Base(t.Dir)})
		if err != nil {
			return err
		}
		var obs tbench2.Observation
		if err := r.Decode(&obs); err != nil {
			return err
		}
		if ep.inSandbox == nil {
			ep.rep.SandboxID, _ = obs.Info["sandbox_id"].(string)
		}
		return nil
	}, ctx)
	if err != nil {
		ep.skip("exec", "verifier")
		return
	}
	err = ep.phase("exec", t.AgentTimeout, func(ctx context.Context) error {
		if o.Agent == "nop" {
			return nil
		}
		return ep.solve(ctx, t)
	}, ctx)
	if err != nil && ep.rep.ExitStatus == TimeLimitExceeded {
		ep.skip("verifier")
		return
	}
	ep.phase("verifier", t.VerifierTimeout, func(ctx context.Context) error { return ep.evaluate(ctx) }, ctx)
}

// solve stages solution/ at /solution through exec actions alone, in base64
// chunks, and runs solve.sh as Harbor's oracle does.
func (ep *oeEpisode) solve(ctx context.Context, t *task.Task) error {
	if t.SolutionScript == "" {
		return fmt.Errorf("task %s has no solution/solve.sh for the golden agent", t.Name)
	}
	cmds, err := tbench2.PushCommands(ctx, filepath.Dir(t.SolutionScript), agent.SolutionDir)
	if err != nil {
		return err
	}
	run, err := tbench2.SolveCommand(agent.SolutionDir+"/solve.sh", agent.AgentLogs+"/oracle.txt", t.Config.Solution.Env)
	if err != nil {
		return err
	}
	for _, cmd := range cmds {
		obs, err := ep.exec(ctx, cmd)
		if err != nil {
			return err
		}
		if !obs.Success || obs.Info["exit_code"] != float64(0) {
			return fmt.Errorf("staging the solution failed (%v): %s%s", obs.Info["exit_code"], obs.Error, tail(obs.Output))
		}
	}
	// A failing solve.sh is an answer, not an error: the verifier decides.
	_, err = ep.exec(ctx, run)
	return err
}

func (ep *oeEpisode) exec(ctx context.Context, cmd string) (tbench2.Observation, error) {
	var obs tbench2.Observation
	r, err := ep.client.Step(ctx, tbench2.Exec(cmd))
	if err == nil {
		err = r.Decode(&obs)
	}
	return obs, err
}

// evaluate scores the episode; only a verdict marked with the task's own
// harness counts, as a trainer would take it.
func (ep *oeEpisode) evaluate(ctx context.Context) error {
	r, err := ep.client.Step(ctx, tbench2.Action{ActionType: tbench2.ActionEvaluate, Block: true})
	if err != nil {
		return err
	}
	var obs tbench2.Observation
	if err := r.Decode(&obs); err != nil {
		return err
	}
	if r.Reward == nil || obs.Error != "" || obs.Info["harness"] != tbench2.Harness {
		return fmt.Errorf("no verdict (error %q, harness %v)%s", obs.Error, obs.Info["harness"], tail(obs.Output))
	}
	if ep.rep.Exception == "" {
		ep.rep.ExitStatus = Submitted
	}
	ep.rep.Reward = *r.Reward
	return nil
}

// tail is the end of a command's output, for a failure's message.
func tail(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	if len(s) > 400 {
		s = "..." + s[len(s)-400:]
	}
	return "; output: " + s
}
