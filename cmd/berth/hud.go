package main

import (
	"fmt"
	"io"
	"log/slog"
	"net"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth/harbor/task"
	"github.com/berth-sh/berth/hud"
	"github.com/berth-sh/berth/hud/hudserve"
)

func (a *app) hudCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hud",
		Short: "HUD's environment protocol: serve Harbor tasks to HUD clients",
		Long: `HUD's clients talk to an environment over a raw-TCP control channel
(newline-delimited JSON-RPC) and reach its capabilities through tunnels on the
same port. "berth hud serve" is such an environment for Harbor and
Terminal-Bench tasks, with sandboxes from any provider.`,
	}
	cmd.AddCommand(a.hudServeCmd(), a.hudUpCmd(), a.hudTunnelCmd())
	return cmd
}

func (a *app) hudServeCmd() *cobra.Command {
	var backend, tasksDir, addr, logLevel string
	var o hudserve.Options
	cmd := &cobra.Command{
		Use:   "serve --tasks DIR [--backend NAME] [--addr 127.0.0.1:8765]",
		Short: "Serve Harbor tasks over HUD's protocol, one sandbox per session",
		Long: `Serve the Harbor / Terminal-Bench tasks under DIR over HUD's protocol, with
no Python in the image. Each control session gets its own sandbox, created at
tasks.start (the instruction is the prompt) and deleted at tasks.grade (which
runs the task's verifier; its reward is the score), tasks.cancel, bye, or
when the session's connection drops and the heartbeat window passes without
a resuming hello.

Every hello reply offers the shell as two capabilities, with credentials of
that session alone: "tools" (MCP over streamable HTTP: bash, read_file,
write_file, list_dir) and "shell" (SSH, user agent, the session's key in
params.client_key). Both are reached through tunnel.open on the control port;
"berth hud tunnel" is an SSH ProxyCommand for that.

Point HUD's client at the printed runtime URL (hud.Runtime("tcp://...")).
Anyone who reaches the port can run sandboxes: keep it on loopback or behind
your own network controls.`,
		Example: `  berth hud serve --backend local --tasks ./terminal-bench/tasks
  berth hud serve --backend daytona --tasks ./tasks --addr 127.0.0.1:0`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return usageError(fmt.Errorf("--log-level %q is not debug, info, warn or error", logLevel))
			}
			o.Logger = slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: lvl}))
			tasks, err := task.LoadDir(tasksDir)
			if err != nil {
				return usageError(err)
			}
			for _, t := range tasks {
				if err := t.Err(); err != nil {
					fmt.Fprintf(a.stderr, "berth hud serve: skipping task %s: %v\n", t.Name, err)
					continue
				}
				o.Tasks = append(o.Tasks, t)
			}
			if len(o.Tasks) == 0 {
				return usageError(fmt.Errorf("no runnable task under %s", tasksDir))
			}
			ctx := cmd.Context()
			name := a.backendName(backend)
			p, err := a.openWith(ctx, name, map[string]string{})
			if err != nil {
				return err
			}
			defer p.Close()
			if e, err := a.reg.Lookup(name); err == nil {
				o.TTLMargin = e.TTLMargin
			}
			o.Provider, o.Version = p, buildVersion()
			return classExit(hudserve.ListenAndServe(ctx, addr, o, func(bound net.Addr) {
				// The first line is HUD's own announcement, which its spawn
				// provider reads.
				fmt.Fprintf(a.stdout, "HUD_SERVE_PORT=%d\n# berth hud serve: %d tasks on %q; HUD runtime: tcp://%s\n",
					bound.(*net.TCPAddr).Port, len(o.Tasks), p.Name(), bound)
			}))
		}),
	}
	a.backendFlag(cmd, &backend)
	f := cmd.Flags()
	f.StringVar(&tasksDir, "tasks", "", "a task directory, or a directory of them (required)")
	_ = cmd.MarkFlagRequired("tasks")
	f.StringVar(&addr, "addr", "127.0.0.1:8765", "control channel address (host:port; port 0 picks one)")
	f.StringVar(&o.Advertise, "advertise", "", "host:port put in capability URLs (default: the bound address)")
	f.DurationVar(&o.Limits.HeartbeatWindow, "heartbeat-window", hud.DefaultHeartbeatWindow, "how long a session may be silent, or parked after its connection dropped, before its sandbox is deleted")
	f.IntVar(&o.MaxSandboxes, "max-sandboxes", 64, "sandboxes alive at once; tasks.start beyond is refused")
	f.IntVar(&o.Limits.MaxFrame, "max-frame-bytes", 1<<20, "largest control frame")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	return cmd
}

func (a *app) hudTunnelCmd() *cobra.Command {
	var addr, capability string
	cmd := &cobra.Command{
		Use:   "tunnel --addr HOST:PORT [--capability shell]",
		Short: "Open a capability tunnel and splice it to stdin and stdout (an SSH ProxyCommand)",
		Long: `Open a tunnel to one capability of a HUD environment (a connection whose first
frame is tunnel.open) and copy its bytes to and from stdin and stdout, so that
OpenSSH reaches the "shell" capability with -o ProxyCommand.`,
		Example: `  ssh -i session_key -l agent -o ProxyCommand='berth hud tunnel --addr 127.0.0.1:8765' hud`,
		Args:    cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			c, err := hud.DialTunnel(cmd.Context(), addr, capability)
			if err != nil {
				return err
			}
			hud.Splice(c, stdio{r: a.stdin, w: a.stdout})
			return nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", "127.0.0.1:8765", "the control channel")
	f.StringVar(&capability, "capability", hudserve.CapabilitySSH, "capability name")
	return cmd
}

// stdio is the command's stdin and stdout as one stream.
type stdio struct {
	r io.Reader
	w io.Writer
}

func (s stdio) Read(b []byte) (int, error)  { return s.r.Read(b) }
func (s stdio) Write(b []byte) (int, error) { return s.w.Write(b) }

// CloseWrite ends stdout, so the peer of a ProxyCommand sees EOF.
func (s stdio) CloseWrite() error {
	if c, ok := s.w.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

func (s stdio) Close() error {
	if c, ok := s.r.(io.Closer); ok {
		_ = c.Close()
	}
	return s.CloseWrite()
}
