package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth/harbor/task"
)

func (a *app) tasksCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tasks",
		Short: "Inspect Harbor / Terminal-Bench tasks",
	}
	cmd.AddCommand(a.tasksLsCmd())
	return cmd
}

// taskRow is one task as `berth tasks ls --json` prints it.
type taskRow struct {
	Name               string         `json:"name"`
	Dir                string         `json:"dir"`
	Schema             string         `json:"schema"`
	Image              string         `json:"image,omitempty"`
	Dockerfile         string         `json:"dockerfile,omitempty"`
	CPUs               float64        `json:"cpus"`
	MemoryMB           int            `json:"memory_mb"`
	StorageMB          int            `json:"storage_mb"`
	AgentTimeoutSec    float64        `json:"agent_timeout_sec"`
	VerifierTimeoutSec float64        `json:"verifier_timeout_sec"`
	BuildTimeoutSec    float64        `json:"build_timeout_sec"`
	Network            string         `json:"network"`
	OK                 bool           `json:"ok"`
	Problems           []task.Problem `json:"problems"`
}

func (a *app) tasksLsCmd() *cobra.Command {
	var path string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls -p DIR [--json]",
		Short: "List the tasks under a directory with their resources, timeouts and problems",
		Long: `List every task under DIR (DIR itself when it holds a task.toml, else each
directory below it that does): name, image or Dockerfile, cpus, memory_mb,
storage_mb, the agent / verifier / build timeouts, and any problems with file,
line and field. A malformed task is listed with its problems, never skipped.
A timeout of "-" means none (schema 1.4 allows leaving it out).

Exit status 1 when any task has an error.`,
		Example: `  berth tasks ls -p ./tasks
  berth tasks ls -p ./tasks --json | jq '.[] | select(.ok | not)'`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			tasks, err := task.LoadDir(path)
			if err != nil {
				return usageError(err)
			}
			rows := make([]taskRow, 0, len(tasks))
			bad := 0
			for _, t := range tasks {
				r := taskRow{
					Name: t.Name, Dir: t.Dir, Schema: t.Schema, Image: t.Image, Dockerfile: t.Dockerfile,
					CPUs: t.CPUs, MemoryMB: t.MemoryMB, StorageMB: t.StorageMB,
					AgentTimeoutSec: t.AgentTimeout.Seconds(), VerifierTimeoutSec: t.VerifierTimeout.Seconds(),
					BuildTimeoutSec: t.BuildTimeout.Seconds(), Network: t.Network, OK: t.OK(), Problems: t.Problems,
				}
				if r.Problems == nil {
					r.Problems = []task.Problem{}
				}
				if !r.OK {
					bad++
				}
				rows = append(rows, r)
			}
			if asJSON {
				b, err := json.MarshalIndent(rows, "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "%s\n", b)
			} else {
				printTasks(a, rows)
			}
			if bad > 0 {
				return failure(fmt.Errorf("%d of %d tasks have errors", bad, len(rows)))
			}
			return nil
		}),
	}
	cmd.Flags().StringVarP(&path, "path", "p", "", "directory of tasks, or one task directory")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	_ = cmd.MarkFlagRequired("path")
	return cmd
}

func printTasks(a *app, rows []taskRow) {
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tIMAGE\tCPUS\tMEMORY_MB\tSTORAGE_MB\tAGENT\tVERIFIER\tBUILD\tNETWORK")
	secs := func(s float64) string {
		if s == 0 {
			return "-"
		}
		return fmt.Sprintf("%gs", s)
	}
	for _, r := range rows {
		img := r.Image
		if img == "" && r.Dockerfile != "" {
			img = "(Dockerfile)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%g\t%d\t%d\t%s\t%s\t%s\t%s\n", r.Name, img, r.CPUs, r.MemoryMB, r.StorageMB,
			secs(r.AgentTimeoutSec), secs(r.VerifierTimeoutSec), secs(r.BuildTimeoutSec), r.Network)
	}
	tw.Flush()
	for _, r := range rows {
		for _, p := range r.Problems {
			fmt.Fprintf(a.stdout, "%s: %s\n", r.Name, strings.TrimSpace(p.String()))
		}
	}
}
