package smoke

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berth-sh/berth/harbor/agent"
	"github.com/berth-sh/berth/harbor/task"
	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/hud"
	"github.com/berth-sh/berth/hud/hudserve"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/sandbox"
)

// maxSolution bounds the solution/ files the golden client sends through
// write_file.
const maxSolution = 8 << 20

// runHUD is the golden episode through HUD's protocol: an in-process
// `berth hud serve` over the provider, and a client that says hello,
// starts the task, runs solve.sh through the MCP bash tool over a
// tunnel, grades and says bye.
func runHUD(ctx context.Context, o Options, entry registry.Entry, prov *sandbox.Provider, t *task.Task, log *slog.Logger) *Report {
	rep := &Report{Connector: "hud", Backend: entry.Name, Task: t.Name, Agent: o.Agent}
	if o.TaskDir == "" {
		rep.Task += " (built-in)"
	}
	var mu sync.Mutex
	srv, err := hudserve.New(hudserve.Options{
		Provider: prov, Tasks: []*task.Task{t}, TTLMargin: entry.TTLMargin, Logger: log,
		Events: func(e hudserve.Event) {
			mu.Lock()
			defer mu.Unlock()
			if !e.Deleted {
				rep.SandboxID = e.Sandbox
			}
		},
	})
	start := time.Now()
	ep := &episode{}
	if err == nil {
		err = ep.run(ctx, srv, prov, t, o.Agent)
	}
	tear := time.Now()
	if srv != nil {
		srv.Close() // waits for the sandbox's deletion
	}
	ep.add("teardown", time.Since(tear), true)
	rep.Phases = ep.phases
	rep.Total = time.Since(start)
	rep.TotalSec = rep.Total.Seconds()
	mu.Lock()
	defer mu.Unlock()
	rep.ExitStatus = AgentError
	switch {
	case err != nil:
		rep.Exception, rep.Message = "HUDError", err.Error()
		if errors.Is(err, context.DeadlineExceeded) {
			rep.ExitStatus = TimeLimitExceeded
		}
	case ep.grade.IsError:
		kind, _ := ep.grade.Info["exception_type"].(string)
		rep.Exception = kind
		if ep.grade.Content != nil {
			rep.Message = *ep.grade.Content
		}
		if trial.Kind(kind) == trial.VerifierTimeout {
			rep.ExitStatus = TimeLimitExceeded
		}
	default:
		rep.Reward, rep.ExitStatus = ep.grade.Score, Submitted
	}
	rep.Pass = rep.Reward == 1.0 && rep.ExitStatus == Submitted
	return rep
}

// episode runs the protocol side of one golden episode and times it.
type episode struct {
	phases []Phase
	grade  hud.Grade
}

func (e *episode) add(name string, d time.Duration, ran bool) {
	e.phases = append(e.phases, Phase{Name: name, Duration: d, Seconds: d.Seconds(), Ran: ran})
}

// timed runs fn as the named phase; phases after a failure are listed as
// not run.
func (e *episode) timed(name string, fn func() error) error {
	t0 := time.Now()
	err := fn()
	e.add(name, time.Since(t0), true)
	return err
}

func (e *episode) run(ctx context.Context, srv *hudserve.Server, prov *sandbox.Provider, t *task.Task, agentName string) error {
	names := []string{"image resolution", "sandbox create", "exec", "verifier"}
	defer func() {
		for _, n := range names[len(e.phases):] {
			e.add(n, 0, false)
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = srv.Serve(ln) }()
	addr := ln.Addr().String()
	// The image is resolved ahead, so that sandbox create times the create.
	err = e.timed(names[0], func() error {
		return prov.PrepareImage(ctx, trial.TaskSpec(t, trial.Overrides{}))
	})
	if err != nil {
		return err
	}
	return golden(ctx, addr, t, agentName, e)
}

// golden drives one episode on the HUD control channel at addr: hello,
// tasks.start, the agent's work through the MCP bash tool over a tunnel
// (golden: the task's solution; nop: nothing), tasks.grade and bye, each
// timed into ep.
func golden(ctx context.Context, addr string, t *task.Task, agentName string, ep *episode) error {
	timer := ep
	c, err := hud.DialReady(ctx, addr, 100*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := timer.timed("sandbox create", func() error { _, err := c.Start(ctx, t.Name, nil); return err }); err != nil {
		return err
	}
	err = timer.timed("exec", func() error {
		actx := ctx
		if t.AgentTimeout > 0 {
			var cancel context.CancelFunc
			actx, cancel = context.WithTimeout(ctx, t.AgentTimeout)
			defer cancel()
		}
		return runAgent(actx, c, t, agentName)
	})
	if err != nil {
		return err
	}
	err = timer.timed("verifier", func() error {
		g, err := c.Grade(ctx, map[string]any{"answer": ""})
		if err == nil {
			ep.grade = *g
		}
		return err
	})
	if err != nil {
		return err
	}
	return c.Bye(ctx)
}

// runAgent is the agent's side: golden sends solution/ through write_file
// and runs solve.sh through bash, as the oracle agent does on a trial.
func runAgent(ctx context.Context, c *hud.Client, t *task.Task, agentName string) error {
	a, err := agent.New(agentName)
	if err != nil {
		return err
	}
	if a.Name() == "nop" {
		return nil
	}
	b, err := c.Binding(hudserve.CapabilityMCP)
	if err != nil {
		return err
	}
	token, _ := b.Params["auth_token"].(string)
	mc := mcp.NewClient(&mcp.Implementation{Name: "berth-smoke", Version: "1"}, nil)
	cs, err := mc.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: b.URL, HTTPClient: hud.HTTPClient(c.Addr(), b.Name, token), DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		return fmt.Errorf("mcp: %w", err)
	}
	defer cs.Close()
	files, err := solutionFiles(filepath.Dir(t.SolutionScript))
	if err != nil {
		return err
	}
	for _, rel := range files {
		body, err := os.ReadFile(filepath.Join(filepath.Dir(t.SolutionScript), rel))
		if err != nil {
			return err
		}
		if err := call(ctx, cs, "write_file", map[string]any{"path": agent.SolutionDir + "/" + filepath.ToSlash(rel), "content": string(body)}); err != nil {
			return err
		}
	}
	var env strings.Builder
	env.WriteString("export DEBIAN_FRONTEND=noninteractive; ")
	keys := make([]string, 0, len(t.Config.Solution.Env))
	for k := range t.Config.Solution.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&env, "export %s=%s; ", k, shellQuote(t.Config.Solution.Env[k]))
	}
	script := fmt.Sprintf("%schmod +x %s/solve.sh && %s/solve.sh > %s/oracle.txt 2>&1", env.String(), agent.SolutionDir, agent.SolutionDir, agent.AgentLogs)
	// A failing solution is an answer, not an error: the exit code is in
	// the result and the verifier decides.
	return call(ctx, cs, "bash", map[string]any{"command": script})
}

func call(ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any) error {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return fmt.Errorf("mcp %s: %w", tool, err)
	}
	if res.IsError {
		var msg strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				msg.WriteString(tc.Text)
			}
		}
		return fmt.Errorf("mcp %s: %s", tool, msg.String())
	}
	return nil
}

// solutionFiles lists solution/'s regular files, bounded in total.
func solutionFiles(dir string) ([]string, error) {
	var out []string
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if total += fi.Size(); total > maxSolution {
			return fmt.Errorf("solution/ holds more than %d bytes", maxSolution)
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, rel)
		return nil
	})
	return out, err
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
