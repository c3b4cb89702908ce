package main

import (
	"bufio"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth/providers/local/agentinit"
)

// agentCmd is the local provider's in-sandbox agent: PID 1 of each local
// sandbox, started by the provider with its socket and configuration as
// inherited fds. Hidden: people never run it.
func (a *app) agentCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:    "agent",
		Short:  "Run as a local sandbox's init (started by the local provider)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return agentinit.Main(cmd.Context(), agentinit.Options{})
		}),
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "tar-x DIR",
		Short: "Unpack a tar stream from stdin into DIR",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			err := agentinit.ExtractTar(cmd.Context(), args[0], bufio.NewReaderSize(a.stdin, 256<<10))
			return helperExit(err)
		},
	}, &cobra.Command{
		Use:   "tar-c PATH",
		Short: "Write the tree at PATH to stdout as a tar stream",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w := bufio.NewWriterSize(a.stdout, 256<<10)
			err := agentinit.WriteTar(cmd.Context(), args[0], w)
			if ferr := w.Flush(); err == nil {
				err = ferr
			}
			return helperExit(err)
		},
	})
	return cmd
}

// helperExit gives a tar helper's error the status the provider classes.
func helperExit(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: agentinit.ExitCode(err), err: fmt.Errorf("%w", err)}
}
