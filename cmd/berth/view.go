package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth/internal/httpserve"
	"github.com/berth-sh/berth/results"
	"github.com/berth-sh/berth/view"
)

func (a *app) viewCmd() *cobra.Command {
	var addr string
	var hosts []string
	cmd := &cobra.Command{
		Use:   "view [DIR...] [--addr 127.0.0.1:8321]",
		Short: "Browse jobs, trials, trajectories and samples in a web browser",
		Long: `Serve a read-only web app over jobs directories (default ./jobs): every job
with its agent, backend, counts, mean reward, pass rate, errors by type and
wall time; one job's trials (sortable, filterable, paged), pass@k per task,
reward and phase-latency charts; one trial's instruction, trajectory,
verifier output, reward file, exception and timeline; rollout samples with
their loss masks and logprobs; and two jobs compared task by task. A job
that is still running updates in place.

DIR is a jobs directory (the -o of berth run) or one job directory. The
server binds 127.0.0.1 by default and has no authentication: to look from
another machine, forward the port (ssh -L 8321:127.0.0.1:8321 host).`,
		Example: `  berth view
  berth view ./jobs ./old-jobs --addr 127.0.0.1:9000`,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				args = []string{"jobs"}
			}
			lib, err := results.Open(args...)
			if err != nil {
				return usageError(err)
			}
			defer lib.Close()
			srv, err := view.New(lib, view.Options{AllowedHosts: hosts, Logger: slog.New(slog.NewTextHandler(a.stderr, nil))})
			if err != nil {
				return err
			}
			return a.serveView(cmd.Context(), addr, srv)
		}),
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8321", "address to listen on")
	cmd.Flags().StringSliceVar(&hosts, "allow-host", nil, "host names (besides localhost and IP addresses) the browser may use to reach the viewer")
	return cmd
}

func (a *app) serveView(ctx context.Context, addr string, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return usageError(err)
	}
	if host, _, _ := net.SplitHostPort(ln.Addr().String()); !net.ParseIP(host).IsLoopback() {
		fmt.Fprintf(a.stderr, "berth view: listening on %s, which is not loopback: anyone who can reach it can read these jobs\n", ln.Addr())
	}
	fmt.Fprintf(a.stdout, "berth view: http://%s/\n", ln.Addr())
	return httpserve.Serve(ctx, ln, h, httpserve.Options{ReadTimeout: 30 * time.Second})
}
