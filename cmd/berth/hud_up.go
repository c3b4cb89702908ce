package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth/hud/hudup"
	"github.com/berth-sh/berth/sandbox"
)

func (a *app) hudUpCmd() *cobra.Command {
	var backend, network string
	var envs []string
	o := hudup.Options{}
	cmd := &cobra.Command{
		Use:   "up --image IMG [--cmd CMD] [--port 8765] [--backend NAME]",
		Short: "Run a HUD environment image in a sandbox and print its tcp:// runtime URL",
		Long: `Start a HUD environment image's own server in a sandbox on any provider whose
ports carry raw TCP (berth providers: local, modal), and keep it up until
Ctrl-C, which deletes the sandbox.

The command (default: hud serve env.py --host 0.0.0.0 --port PORT) runs with
sh -c in /app when the image has it, else in the image's working directory,
with /app/.venv/bin first in PATH when there is one, as HUD's images are laid
out. PORT is declared as a tcp port of the sandbox; once the control channel
answers hello through it, berth prints the tcp:// runtime URL for HUD's
client (hud.Runtime("tcp://..."), hud eval --runtime tcp://...) as the one
line on stdout; the server's output and berth's notes go to stderr. The
sandbox's deadline is kept --ttl ahead while berth runs, so a killed berth
leaks it for at most that long.

On the local provider the URL is a loopback listener of this berth process:
it works while "berth hud up" runs.`,
		Example: `  berth hud up --backend local --image my-hud-env:latest > hud-url.txt &
  hud eval tasks.json --runtime "$(cat hud-url.txt)"    # once the URL is there
  berth hud up --backend modal --image my-hud-env:latest --port 9000   # hud serve ... --port 9000
  berth hud up --image my-env:1 --cmd 'python -m my_env --port 8765'`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.Env, err = parseEnv(envs); err != nil {
				return err
			}
			if o.Port < 1 || o.Port > 65535 {
				return usageError(fmt.Errorf("--port %d is not in 1-65535", o.Port))
			}
			o.Network.Mode = sandbox.NetworkMode(network)
			o.Output = a.stderr
			o.Logger = slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			ctx := cmd.Context()
			p, err := a.open(ctx, backend)
			if err != nil {
				return err
			}
			defer p.Close()
			o.Provider = p
			env, err := hudup.Up(ctx, o)
			if err != nil {
				return classExit(err)
			}
			// Ctrl-C has cancelled ctx by the time the sandbox is deleted.
			defer func() {
				dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
				defer cancel()
				if derr := env.Delete(dctx); derr != nil {
					fmt.Fprintf(a.stderr, "berth hud up: deleting %s: %v\n", env.SandboxID(), derr)
					return
				}
				fmt.Fprintf(a.stderr, "# berth hud up: deleted sandbox %s\n", env.SandboxID())
			}()
			name := "?"
			if m := env.Manifest(); m != nil {
				name = m.Env.Name
			}
			fmt.Fprintf(a.stderr, "# berth hud up: environment %q in sandbox %s on %q; HUD runtime: %s; Ctrl-C deletes it\n",
				name, env.SandboxID(), p.Name(), env.URL())
			fmt.Fprintln(a.stdout, env.URL())
			if exp := env.Endpoint().Expires; !exp.IsZero() {
				fmt.Fprintf(a.stderr, "berth hud up: the URL stops working at %s\n", exp.UTC().Format(time.RFC3339))
			}
			return classExit(env.Run(ctx))
		}),
	}
	a.backendFlag(cmd, &backend)
	f := cmd.Flags()
	f.StringVar(&o.Image, "image", "", "the HUD environment image (required)")
	_ = cmd.MarkFlagRequired("image")
	f.StringVar(&o.Command, "cmd", "", `shell command that starts the server (default "hud serve env.py --host 0.0.0.0 --port PORT")`)
	f.IntVar(&o.Port, "port", hudup.DefaultPort, "the control port the server listens on inside the sandbox")
	f.StringVar(&o.WorkDir, "workdir", "", "the command's directory (default /app when the image has it)")
	f.StringArrayVar(&envs, "env", nil, "environment NAME=value for the server (repeatable)")
	f.StringVar(&network, "network", "none", "egress: none or public (never the host)")
	f.Float64Var(&o.Resources.CPUs, "cpus", 0, "cpu cores (fractions allowed)")
	f.IntVar(&o.Resources.MemoryMB, "memory-mb", 0, "memory in MB")
	f.DurationVar(&o.TTL, "ttl", hudup.DefaultTTL, "how far ahead the sandbox's deadline is kept while berth runs")
	f.DurationVar(&o.ReadyTimeout, "ready-timeout", hudup.DefaultReadyTimeout, "how long to wait for the control channel to answer hello")
	return cmd
}
