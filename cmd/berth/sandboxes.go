package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth/sandbox"
)

func (a *app) sandboxesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "sandboxes",
		Aliases: []string{"sb"},
		Short:   "Create, list, remove and reap sandboxes on any provider",
	}
	cmd.AddCommand(a.sbCreateCmd(), a.sbLsCmd(), a.sbRmCmd(), a.sbReapCmd())
	return cmd
}

func parseLabels(kvs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range kvs {
		k, v, err := sandbox.ParseLabel(kv)
		if err != nil {
			return nil, usageError(err)
		}
		out[k] = v
	}
	return out, nil
}

func (a *app) sbCreateCmd() *cobra.Command {
	var backend, network string
	var labels, envs, ports []string
	var spec sandbox.Spec
	cmd := &cobra.Command{
		Use:   "create --image REF [--cpus N] [--memory-mb N] [--label k=v]... [--ttl 10m] [--network none|public] [--port 8000[/tcp]]...",
		Short: "Create a sandbox and print its id",
		Long: `Create a sandbox from an image and print its id on stdout. The sandbox lives
until its TTL passes (enforced by the provider, so it goes away even if
nothing ever deletes it) or until "berth sandboxes rm ID".

Every sandbox gets the label berth.launcher=cli besides the ones given.

--port declares a port the sandbox will serve, for "berth port": 8000 or
8000/http for HTTP (WebSocket included), 8000/tcp for raw TCP. Modal opens
only declared ports; other providers expose any port later, and check only
that they carry the protocol.`,
		Example: `  id=$(berth sandboxes create --image debian:bookworm-slim --ttl 10m --label owner=$USER)
  berth exec $id -- uname -a
  berth sandboxes rm $id
  id=$(berth sandboxes create --backend modal --image python:3.12-slim --port 8000 --port 8765/tcp)`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			var err error
			if spec.Labels, err = parseLabels(labels); err != nil {
				return err
			}
			spec.Labels["berth.launcher"] = "cli"
			spec.Env = map[string]string{}
			for _, kv := range envs {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return usageError(fmt.Errorf("--env %q is not NAME=value", kv))
				}
				spec.Env[k] = v
			}
			spec.Network.Mode = sandbox.NetworkMode(network)
			for _, s := range ports {
				port, err := sandbox.ParsePort(s)
				if err != nil {
					return usageError(err)
				}
				spec.Ports = append(spec.Ports, port)
			}
			p, err := a.open(cmd.Context(), backend)
			if err != nil {
				return err
			}
			defer p.Close()
			sb, err := p.Create(cmd.Context(), spec)
			if err != nil {
				return classExit(err)
			}
			defer sb.Close()
			fmt.Fprintln(a.stdout, sb.ID())
			return nil
		}),
	}
	a.backendFlag(cmd, &backend)
	f := cmd.Flags()
	f.StringVar(&spec.Image, "image", "", "image reference (local: pulled or imported with berth image import)")
	f.Float64Var(&spec.Resources.CPUs, "cpus", 0, "cpu cores (fractions allowed)")
	f.IntVar(&spec.Resources.MemoryMB, "memory-mb", 0, "memory in MB")
	f.IntVar(&spec.Resources.StorageMB, "storage-mb", 0, "disk in MB")
	f.StringArrayVar(&labels, "label", nil, "label k=v (repeatable)")
	f.StringArrayVar(&envs, "env", nil, "environment NAME=value (repeatable)")
	f.StringVar(&spec.WorkDir, "workdir", "", "default working directory of commands")
	f.DurationVar(&spec.TTL, "ttl", 10*time.Minute, "lifetime, enforced by the provider")
	f.StringVar(&network, "network", "none", "egress: none or public (never the host)")
	f.StringArrayVar(&ports, "port", nil, "a port the sandbox serves, 8000[/http] or 8000/tcp (repeatable)")
	_ = cmd.MarkFlagRequired("image")
	return cmd
}

func (a *app) sbLsCmd() *cobra.Command {
	var backend string
	var labels []string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls [--label k=v]... [--json]",
		Short: "List live sandboxes, optionally only those with every given label",
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			want, err := parseLabels(labels)
			if err != nil {
				return err
			}
			p, err := a.open(cmd.Context(), backend)
			if err != nil {
				return err
			}
			defer p.Close()
			infos, err := p.List(cmd.Context(), want)
			if err != nil {
				return classExit(err)
			}
			if asJSON {
				if infos == nil {
					infos = []sandbox.Info{}
				}
				return writeJSON(a.stdout, infos)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tIMAGE\tSTATE\tEXPIRES\tLABELS")
			for _, in := range infos {
				exp := "-"
				if !in.ExpiresAt.IsZero() {
					exp = time.Until(in.ExpiresAt).Round(time.Second).String()
				}
				var ls []string
				for _, k := range slices.Sorted(maps.Keys(in.Labels)) {
					ls = append(ls, k+"="+in.Labels[k])
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", in.ID, in.Image, in.State, exp, strings.Join(ls, ","))
			}
			return tw.Flush()
		}),
	}
	a.backendFlag(cmd, &backend)
	cmd.Flags().StringArrayVar(&labels, "label", nil, "only sandboxes with this label k=v (repeatable)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	return cmd
}

func (a *app) sbRmCmd() *cobra.Command {
	var backend string
	cmd := &cobra.Command{
		Use:   "rm ID...",
		Short: "Delete sandboxes",
		Args:  cobra.MinimumNArgs(1),
		RunE: runE(func(cmd *cobra.Command, ids []string) error {
			p, err := a.open(cmd.Context(), backend)
			if err != nil {
				return err
			}
			defer p.Close()
			var failed int
			for _, id := range ids {
				if err := p.Delete(cmd.Context(), id); err != nil {
					fmt.Fprintf(a.stderr, "berth: %v\n", err)
					failed++
					continue
				}
				fmt.Fprintln(a.stdout, id)
			}
			if failed > 0 {
				return failure(fmt.Errorf("%d of %d sandboxes not deleted", failed, len(ids)))
			}
			return nil
		}),
	}
	a.backendFlag(cmd, &backend)
	return cmd
}

func (a *app) sbReapCmd() *cobra.Command {
	var backend string
	var labels []string
	var all bool
	cmd := &cobra.Command{
		Use:   "reap (--label k=v... | --all)",
		Short: "Delete every sandbox with the given labels, and clean up expired leftovers",
		Long: `Delete every live sandbox that carries all the given labels (all of them when
--all is given instead), then remove what expired or dead sandboxes left
behind where the provider keeps local state (the local provider's mounts and
directories). Prints the ids it removed.`,
		Example: `  berth sandboxes reap --label berth.job=nightly
  berth sandboxes reap --backend daytona --label berth.launcher=berth-run`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			want, err := parseLabels(labels)
			if err != nil {
				return err
			}
			if len(want) == 0 && !all {
				return usageError(fmt.Errorf("reap deletes every sandbox that matches: give --label k=v, or --all to mean every sandbox"))
			}
			p, err := a.open(cmd.Context(), backend)
			if err != nil {
				return err
			}
			defer p.Close()
			ctx := cmd.Context()
			infos, err := p.List(ctx, want)
			if err != nil {
				return classExit(err)
			}
			var failed int
			for _, in := range infos {
				if err := sandbox.IgnoreNotFound(p.Delete(ctx, in.ID)); err != nil {
					fmt.Fprintf(a.stderr, "berth: %v\n", err)
					failed++
					continue
				}
				fmt.Fprintln(a.stdout, in.ID)
			}
			ids, err := p.Reap(ctx)
			for _, id := range ids {
				fmt.Fprintln(a.stdout, id)
			}
			if err != nil {
				return classExit(err)
			}
			if failed > 0 {
				return failure(fmt.Errorf("%d sandboxes not deleted", failed))
			}
			return nil
		}),
	}
	a.backendFlag(cmd, &backend)
	cmd.Flags().StringArrayVar(&labels, "label", nil, "only sandboxes with this label k=v (repeatable)")
	cmd.Flags().BoolVar(&all, "all", false, "reap every sandbox of the provider")
	return cmd
}
