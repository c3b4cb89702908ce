package main

import (
	"github.com/spf13/cobra"

	"github.com/berth-sh/berth/agent/podagent"
)

// k8sAgentCmd is the k8s provider's in-pod agent: PID 1 of each sandbox Pod,
// and, with --install, the initContainer that copies the binary into the
// pod. Hidden: people never run it.
func (a *app) k8sAgentCmd() *cobra.Command {
	var install, untar, tarPath string
	c := &cobra.Command{
		Use:    "k8s-agent",
		Short:  "Run as a Kubernetes sandbox's init (started by the k8s provider)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			switch {
			case install != "":
				return podagent.Install(install)
			case untar != "":
				return podagent.Untar(cmd.Context(), untar, cmd.InOrStdin())
			case tarPath != "":
				return podagent.Tar(cmd.Context(), tarPath, cmd.OutOrStdout())
			}
			return podagent.Main(cmd.Context(), podagent.Options{})
		}),
	}
	c.Flags().StringVar(&install, "install", "", "copy this binary to `PATH` and exit (the pod's initContainer)")
	c.Flags().StringVar(&untar, "untar", "", "unpack a tar stream from stdin into `DIR` (the provider's tree upload)")
	c.Flags().StringVar(&tarPath, "tar", "", "write the tree at `PATH` to stdout as tar (the provider's tree download)")
	return c
}
