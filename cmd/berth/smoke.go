package main

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth/smoke"
)

func (a *app) smokeCmd() *cobra.Command {
	o := smoke.Options{}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "smoke --connector harbor|openenv|hud [--backend NAME] [--task DIR] [--agent golden|nop] [--json]",
		Short: "Run the golden episode on one provider: PASS or FAIL in seconds",
		Long: `Run one task end to end on one provider through five timed phases: image
resolution, sandbox create, exec (the agent), verifier, teardown. The golden
agent runs the task's own solution, so a healthy provider scores reward 1.0.

--connector harbor runs the task as a Harbor trial; --connector openenv runs
it through the OpenEnv protocol against berth's hosted tbench2 server, in
process: reset creates the sandbox, the solution is pushed in base64 chunks
and run through exec actions, evaluate runs the verifier, close deletes the
sandbox. With --layout sandbox the same server runs inside the task's
sandbox instead (berth-agent uploaded with the task, its solution left out),
reached through the provider's port Endpoint, as in Miles' sandbox recipe:
sandbox create then times the create, the upload and the server's start.
The five phases and the exit status are the same.

Without --task, a small built-in task runs on the provider's default image; it
needs nothing but a shell. On the local provider that image is built offline
from Debian's busybox-static the first time (the command says so).

The provider is --backend, else $BERTH_BACKEND, else $HARBOR_ENV_TYPE, else
local.

Exit status: 0 on PASS (reward 1.0 and exit status Submitted), 1 on FAIL, 2 on
usage or credential errors.`,
		Example: `  berth smoke --connector harbor --backend local
  berth smoke --connector harbor --backend e2b --task ./tasks/fix-git
  berth smoke --connector harbor --backend local --agent nop   # must FAIL
  berth smoke --connector openenv --backend local
  berth smoke --connector openenv --layout sandbox --backend modal
  berth smoke --connector hud --backend local`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			o.Registry, o.Env = a.reg, a.env
			o.Backend = a.backendName(o.Backend)
			rep, err := smoke.Run(cmd.Context(), o, slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
			if err != nil {
				var ue *smoke.UsageError
				if errors.As(err, &ue) {
					return usageError(err)
				}
				return err
			}
			if asJSON {
				fmt.Fprintf(a.stdout, "%s\n", rep.JSON())
			} else {
				rep.Print(a.stdout)
			}
			if !rep.Pass {
				return &exitError{code: exitFailure, err: fmt.Errorf("FAIL: reward %g, exit status %s", rep.Reward, rep.ExitStatus)}
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&o.Connector, "connector", "harbor", "harbor (the task run by the runner), openenv (the episode through the OpenEnv protocol: berth's tbench2 server, exec actions, evaluate) or hud (the episode through HUD's protocol: MCP bash tool over a tunnel, tasks.grade); nemogym is not built yet")
	a.backendFlag(cmd, &o.Backend)
	f.StringVar(&o.TaskDir, "task", "", "task directory; default: the built-in task")
	f.StringVar(&o.Agent, "agent", "golden", "golden (the task's solution) or nop (does nothing; must FAIL)")
	f.StringVar(&o.Layout, "layout", smoke.LayoutHosted, "openenv only: hosted (the server outside the sandbox) or sandbox (inside it, reached through Endpoint; berth-agent beside berth, or $BERTH_AGENT_BINARY, is uploaded)")
	f.StringVar(&o.ResultsDir, "results-dir", "", "keep the trial directory here (default: a temporary one, kept only on FAIL)")
	f.BoolVar(&asJSON, "json", false, "print the report as one JSON object")
	return cmd
}
