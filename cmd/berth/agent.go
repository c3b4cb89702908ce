package main

import (
	"github.com/spf13/cobra"

	"github.com/berth-sh/berth/agent/localagent"
)

// agentCmd is the local provider's in-sandbox agent: PID 1 of each local
// sandbox, started by the provider with its socket and configuration as
// inherited fds. Hidden: people never run it. It serves trees itself
// (localagent.TreePath), so it has no helper verbs.
func (a *app) agentCmd() *cobra.Command {
	var runDir string
	cmd := &cobra.Command{
		Use:    "agent",
		Short:  "Run as a local sandbox's init (started by the local provider)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return localagent.Main(cmd.Context(), localagent.Options{RunDir: runDir})
		}),
	}
	// Under runtimes that cannot pass fds (gVisor's runsc).
	cmd.Flags().StringVar(&runDir, "run-dir", "", "listen and read the config in this directory instead of fds 3 and 4")
	return cmd
}
