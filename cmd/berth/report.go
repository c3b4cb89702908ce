package main

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth/internal/atomicfile"
	"github.com/berth-sh/berth/view"
)

func (a *app) reportCmd() *cobra.Command {
	var out string
	var o view.ReportOptions
	cmd := &cobra.Command{
		Use:   "report JOB_DIR -o report.html",
		Short: "Write one job as a self-contained HTML file",
		Long: `Write the views of berth view for one job into one HTML file that needs no
server and no network: the job's summary, every trial, pass@k per task,
reward and latency charts, and each trial's details (instruction,
trajectory, verifier output, reward file, exception, timeline, samples),
linked by anchors. Attach it to a pull request or a chat. Files are cut
to --max-text bytes each; trials past --max-trials get no details section.`,
		Example: `  berth report jobs/nightly -o nightly.html`,
		Args:    cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usageError(errors.New("give -o FILE"))
			}
			var b bytes.Buffer
			if err := view.Report(cmd.Context(), &b, args[0], o); err != nil {
				return usageError(err)
			}
			if err := atomicfile.Write(out, b.Bytes(), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "berth report: wrote %s (%d bytes)\n", out, b.Len())
			return nil
		}),
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "the HTML file to write")
	cmd.Flags().IntVar(&o.MaxTrials, "max-trials", 1000, "trials with a details section")
	cmd.Flags().IntVar(&o.MaxText, "max-text", 64<<10, "bytes kept of each embedded file")
	return cmd
}
