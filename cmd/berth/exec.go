package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth/sandbox"
)

func (a *app) execCmd() *cobra.Command {
	var backend, dir, user string
	var envs []string
	var interactive bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "exec [--backend NAME] ID -- CMD [ARGS...]",
		Short: "Run a command in a sandbox, streaming its output; exit with its exit code",
		Long: `Run a command in a sandbox. Its stdout and stderr stream to berth's as they
arrive, and berth exits with the command's exit code (128+N when a signal N
killed it). With -i, berth's stdin is copied to the command's.

The command runs as given (no shell): use "sh -c '...'" for shell syntax.`,
		Example: `  berth exec $id -- ls -la /
  berth exec $id -- sh -c 'echo $HOME; exit 3'; echo $?
  tar c . | berth exec -i $id -- tar x -C /work`,
		Args: cobra.MinimumNArgs(2),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 {
				return usageError(errors.New("usage: berth exec ID -- CMD [ARGS...]"))
			}
			id, argv := args[0], args[1:]
			c := sandbox.Command{Args: argv, Dir: dir, User: user, Stdout: a.stdout, Stderr: a.stderr, Timeout: timeout, Env: map[string]string{}}
			for _, kv := range envs {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return usageError(fmt.Errorf("--env %q is not NAME=value", kv))
				}
				c.Env[k] = v
			}
			if interactive {
				c.Stdin = a.stdin
			}
			p, err := a.open(cmd.Context(), backend)
			if err != nil {
				return err
			}
			defer p.Close()
			sb, err := p.Connect(cmd.Context(), id)
			if err != nil {
				return classExit(err)
			}
			defer sb.Close()
			proc, err := sb.Exec(cmd.Context(), c)
			if err != nil {
				return classExit(err)
			}
			code, err := proc.Wait(cmd.Context())
			if err != nil {
				return classExit(err)
			}
			if code != 0 {
				return &exitError{code: code, err: fmt.Errorf("%s exited with code %d", argv[0], code)}
			}
			return nil
		}),
	}
	a.backendFlag(cmd, &backend)
	f := cmd.Flags()
	f.BoolVarP(&interactive, "interactive", "i", false, "copy stdin to the command")
	f.StringVarP(&dir, "workdir", "w", "", "working directory in the sandbox")
	f.StringVarP(&user, "user", "u", "", "run as this user")
	f.StringArrayVarP(&envs, "env", "e", nil, "environment NAME=value (repeatable)")
	f.DurationVar(&timeout, "timeout", 0, "kill the command after this long")
	return cmd
}
