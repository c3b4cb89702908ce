package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth/sandbox"
)

func (a *app) portCmd() *cobra.Command {
	var backend string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "port [--backend NAME] [--json] ID PORT[/tcp]",
		Short: "Print how to reach a port of a sandbox from here",
		Long: `Print the endpoint of a port inside a sandbox: its URL on the first line,
then one "Name: value" line per header a client must send (a routing header,
a traffic token: these are secrets), then "Expires: TIME" where the URL
expires (Daytona's signed preview URLs). PORT is 8000 or 8000/http for HTTP
(WebSocket included), 8000/tcp for raw TCP (tcp://host:port).

Where the endpoint is a listener of this process (the local provider:
127.0.0.1 on a free port, carried over the sandbox's agent), berth keeps it
open until Ctrl-C. Nothing needs to listen on the port yet: a request that
finds nothing there is answered 502 (or closed, for tcp).`,
		Example: `  berth port $id 8000
  curl -s "$(berth port --backend e2b $id 8000 | head -1)"
  berth port $id 8765/tcp &   # local: serves until killed
  berth port --json $id 8000`,
		Args: cobra.ExactArgs(2),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			port, err := sandbox.ParsePort(args[1])
			if err != nil {
				return usageError(err)
			}
			sb, done, err := a.connect(cmd.Context(), backend, args[0])
			if err != nil {
				return err
			}
			defer done()
			ep, err := sb.Endpoint(cmd.Context(), port)
			if err != nil {
				return classExit(err)
			}
			if asJSON {
				if err := writeJSON(a.stdout, ep); err != nil {
					return err
				}
			} else {
				fmt.Fprintln(a.stdout, ep.URL)
				for _, k := range slices.Sorted(maps.Keys(ep.Headers)) {
					fmt.Fprintf(a.stdout, "%s: %s\n", k, ep.Headers[k])
				}
				if !ep.Expires.IsZero() {
					fmt.Fprintf(a.stdout, "Expires: %s\n", ep.Expires.UTC().Format(time.RFC3339))
				}
			}
			if !ep.Local {
				return nil
			}
			fmt.Fprintf(a.stderr, "berth: serving port %s of %s at %s until interrupted\n", port, sb.ID(), ep.URL)
			return waitInterrupt(cmd.Context())
		}),
	}
	a.backendFlag(cmd, &backend)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the endpoint as JSON (url, headers, expires, protocol, local)")
	return cmd
}

func (a *app) forwardCmd() *cobra.Command {
	var backend string
	cmd := &cobra.Command{
		Use:   "forward [--backend NAME] ID SANDBOX_PORT HOST_ADDR",
		Short: "Make a host address reachable inside a sandbox at 127.0.0.1:SANDBOX_PORT",
		Long: `Listen on 127.0.0.1:SANDBOX_PORT inside the sandbox and carry every
connection made there to HOST_ADDR (host:port), dialled from this host, until
interrupted. The sandbox gets no network from it, works on network none, and
reaches HOST_ADDR and nothing else: this is how a harness in the sandbox
reaches a session server or a model endpoint on the host.

Only providers that carry connections themselves can (local); on a cloud
provider, run the host service where the sandbox can reach it and give the
harness that address instead.`,
		Example: `  berth forward $id 30000 127.0.0.1:30000 &
  berth exec $id -- wget -qO- http://127.0.0.1:30000/health`,
		Args: cobra.ExactArgs(3),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			port, err := strconv.Atoi(args[1])
			if err != nil {
				return usageError(fmt.Errorf("sandbox port %q is not a number", args[1]))
			}
			sb, done, err := a.connect(cmd.Context(), backend, args[0])
			if err != nil {
				return err
			}
			defer done()
			f, err := sb.Forward(cmd.Context(), port, args[2])
			if err != nil {
				return classExit(err)
			}
			defer f.Close()
			fmt.Fprintf(a.stderr, "berth: 127.0.0.1:%d in %s leads to %s until interrupted\n", port, sb.ID(), args[2])
			return waitInterrupt(cmd.Context())
		}),
	}
	a.backendFlag(cmd, &backend)
	return cmd
}

// connect opens the backend and connects to sandbox id; done closes both.
func (a *app) connect(ctx context.Context, backend, id string) (*sandbox.Sandbox, func(), error) {
	p, err := a.open(ctx, backend)
	if err != nil {
		return nil, nil, err
	}
	sb, err := p.Connect(ctx, id)
	if err != nil {
		p.Close()
		return nil, nil, classExit(err)
	}
	return sb, func() { sb.Close(); p.Close() }, nil
}

// waitInterrupt blocks until Ctrl-C or SIGTERM (both end the root
// context); either is a normal end.
func waitInterrupt(ctx context.Context) error {
	<-ctx.Done()
	return nil
}
