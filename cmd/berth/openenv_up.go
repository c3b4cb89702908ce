package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/internal/atomicfile"
	"github.com/berth-sh/berth/openenv/up"
	"github.com/berth-sh/berth/sandbox"
)

// upLauncher labels the sandboxes of `berth openenv up`, for reaping.
const upLauncher = "berth-openenv-up"

func (a *app) openenvUpCmd() *cobra.Command {
	var backend, image, command, health, headersFile string
	var port int
	var env []string
	var ttl, ready time.Duration
	cmd := &cobra.Command{
		Use:   "up --image IMG --cmd CMD [--port 8000] [--backend NAME]",
		Short: "Start any OpenEnv env image's server in a sandbox and print its URL",
		Long: `Start an OpenEnv environment server that an image carries (an env image
of OpenEnv's own, or any HTTP server with a /health route) in a sandbox on
the backend, the way OpenEnv's launchers run one in a container: --cmd is
started in the background (with --env added to its environment), GET
/health is polled through the sandbox's Endpoint until it answers 200 (at
most --ready), and the base URL is printed as
  export OPENENV_ENV_URL=...
for a client (OpenEnv's EnvClient, or berth's). Where the provider's URL
needs headers (a preview or traffic token), their names are printed and
--headers-file FILE receives them (mode 0600); they are never printed.

The sandbox stays up until Ctrl-C or SIGTERM, which deletes it; its TTL
(--ttl) is re-armed every sixth of it meanwhile, and a URL that expires (a
signed preview link) is renewed and printed again. A berth killed outright
leaves a sandbox that its TTL ends; "berth sandboxes reap --label
berth.launcher=berth-openenv-up" removes what is left.

The tbench2 environment needs no image of its own: "berth openenv serve"
serves it, and "berth smoke --connector openenv" runs it in the sandbox.`,
		Example: `  berth openenv up --image ghcr.io/me/echo-env:latest \
      --cmd 'cd /app && uvicorn envs.echo_env.server.app:app --host 0.0.0.0 --port 8000'
  berth openenv up --backend modal --image ghcr.io/me/my-env:1 --cmd 'python -m my_env.server' \
      --port 8000 --env MAX_CONCURRENT_ENVS=4 --headers-file ./env.headers`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if image == "" || strings.TrimSpace(command) == "" {
				return usageError(fmt.Errorf("--image and --cmd are required"))
			}
			vars, err := parseEnvPairs(env)
			if err != nil {
				return usageError(err)
			}
			ctx := cmd.Context()
			p, err := a.open(ctx, backend)
			if err != nil {
				return err
			}
			defer p.Close()
			spec := sandbox.Spec{Image: image, TTL: ttl, Network: sandbox.Network{Mode: sandbox.NetworkPublic},
				Labels: map[string]string{trial.LabelLauncher: upLauncher}}
			fmt.Fprintf(a.stderr, "berth openenv up: starting %s on %s, waiting for %s\n", image, p.Name(), health)
			e, err := up.Start(ctx, up.Options{Provider: p, Spec: spec, Port: port, Command: command, Env: vars, HealthPath: health, Ready: ready})
			if err != nil {
				return classExit(err)
			}
			// Deleted however this ends (Ctrl-C ends ctx).
			defer e.Close(context.WithoutCancel(ctx))
			if err := a.printEndpoint(e.Sandbox.ID(), e.Endpoint(), headersFile); err != nil {
				return err
			}
			err = e.Keep(ctx, func(ep sandbox.Endpoint) { _ = a.printEndpoint(e.Sandbox.ID(), ep, headersFile) })
			fmt.Fprintf(a.stderr, "berth openenv up: deleting sandbox %s\n", e.Sandbox.ID())
			if cerr := e.Close(context.WithoutCancel(ctx)); err == nil {
				err = cerr
			}
			return classExit(err)
		}),
	}
	a.backendFlag(cmd, &backend)
	f := cmd.Flags()
	f.StringVar(&image, "image", "", "image whose server to run (a registry reference)")
	f.StringVar(&command, "cmd", "", "the server's shell command line, run in the background")
	f.IntVar(&port, "port", up.DefaultPort, "the server's port inside the sandbox")
	f.StringArrayVar(&env, "env", nil, "KEY=VALUE for the server's environment (repeatable)")
	f.StringVar(&health, "health-path", "/health", "route polled until it answers 200")
	f.DurationVar(&ready, "ready", up.DefaultReady, "how long to wait for the server to be healthy")
	f.DurationVar(&ttl, "ttl", up.DefaultTTL, "the sandbox's TTL, re-armed while berth runs")
	f.StringVar(&headersFile, "headers-file", "", "write the endpoint's headers here (Name: value lines, mode 0600)")
	return cmd
}

// printEndpoint prints the base URL and the names of the headers it
// needs; their values go only to the headers file.
func (a *app) printEndpoint(id string, ep sandbox.Endpoint, headersFile string) error {
	names := make([]string, 0, len(ep.Headers))
	for k := range ep.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	if headersFile != "" {
		var b strings.Builder
		for _, k := range names {
			fmt.Fprintf(&b, "%s: %s\n", k, ep.Headers[k])
		}
		if err := atomicfile.Write(headersFile, []byte(b.String()), 0o600); err != nil {
			return err
		}
	}
	fmt.Fprintf(a.stdout, "# berth openenv up: sandbox %s; Ctrl-C deletes it\n", id)
	if !ep.Expires.IsZero() {
		fmt.Fprintf(a.stdout, "# the URL expires at %s; berth renews it and prints the new one\n", ep.Expires.UTC().Format(time.RFC3339))
	}
	if len(names) > 0 {
		where := "pass --headers-file FILE to have them written"
		if headersFile != "" {
			where = "in " + headersFile
		}
		fmt.Fprintf(a.stdout, "# send the headers %s with every request (%s)\n", strings.Join(names, ", "), where)
	}
	fmt.Fprintf(a.stdout, "export OPENENV_ENV_URL=%s\n", ep.URL)
	if s, ok := a.stdout.(interface{ Sync() error }); ok {
		_ = s.Sync()
	}
	return nil
}

// parseEnvPairs reads KEY=VALUE flags.
func parseEnvPairs(pairs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range pairs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \t\n=") {
			return nil, fmt.Errorf("--env %q is not KEY=VALUE", kv)
		}
		out[k] = v
	}
	return out, nil
}
