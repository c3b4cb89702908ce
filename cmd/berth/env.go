package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) envCmd() *cobra.Command {
	var backend, keyFile, format string
	cmd := &cobra.Command{
		Use:   "env [--backend NAME] [--key-file PATH] [--format sh|json]",
		Short: "Print the environment a worker needs for a provider (never a secret)",
		Long: `Print the environment that a launcher hands its workers for the named
provider (--backend, else $BERTH_BACKEND, else $HARBOR_ENV_TYPE, else local):
BERTH_BACKEND and HARBOR_ENV_TYPE, the path of the key file (never its
contents), the forwarded address and selector variables that are set here, and
the runtime defaults that are not.

Only the environment goes to stdout; the credential supply line and the target
line go to stderr. The credential is looked for file first: --key-file, else
the provider's file variable, else its default path; then the key variables
in the environment, which the workers are then assumed to have as well.

A missing credential, or a forwarded address that contains '@' (it may embed
a credential), is refused with exit status 2.`,
		Example: `  # Shell exports, for a launcher script
  eval "$(berth env --backend e2b)"

  # A flat JSON object, usable as a Ray runtime env's env_vars
  berth env --backend modal --format json

  # AgentENV is the e2b entry pointed at a self-hosted server
  E2B_API_URL=https://agentenv.example:3000 berth env --backend agentenv --key-file ~/agentenv.key`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if format != "sh" && format != "json" {
				return usageError(fmt.Errorf("--format %q: want sh or json", format))
			}
			le, err := a.reg.Launch(a.backendName(backend), a.env, keyFile)
			if err != nil {
				return usageError(err)
			}
			for _, n := range le.Notes {
				fmt.Fprintln(a.stderr, n)
			}
			if format == "json" {
				b, err := le.JSON()
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(a.stdout, "%s\n", b)
				return err
			}
			_, err = fmt.Fprint(a.stdout, le.Shell())
			return err
		}),
	}
	f := cmd.Flags()
	a.backendFlag(cmd, &backend)
	f.StringVar(&keyFile, "key-file", "", "explicit key file; its path is forwarded, never its contents")
	f.StringVar(&format, "format", "sh", "output format: sh (export lines) or json (flat object)")
	return cmd
}
