package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/berth-sh/berth/harbor/job"
)

func (a *app) runCmd() *cobra.Command {
	var cfg job.Config
	var resume string
	var asJSON bool
	var lf llmFlags
	var cf cmdFlags
	cmd := &cobra.Command{
		Use:   "run -p DIR [-a oracle|nop|terminus|command] [-e BACKEND] [-n N] [flags]",
		Short: "Run a Harbor job: every task x attempts as trials on one provider",
		Long: `Run a job of Harbor / Terminal-Bench tasks on one provider. Each selected task
runs --n-attempts times; every trial gets its own sandbox, labelled with the
job and trial, and is torn down at the end. Results land in Harbor's layout,
so tools written for Harbor read them:

  <jobs-dir>/<job-name>/config.json, job.log, result.json
  <jobs-dir>/<job-name>/<task>__<id>/result.json, trial.log, agent/, verifier/

-a terminus evaluates a model: an LLM agent (after Terminus-2) that works in
the sandbox's shell, talking to any OpenAI-compatible endpoint (--api-base,
--model; the key from --api-key-file, else $OPENAI_API_KEY, never logged).
Its token counts and per-turn metrics land in result.json, its trajectory in
agent/trajectory.json; --resume needs the same --api-base again.

` + commandHelp + `
Here --api-base is the endpoint as this host reaches it (the key from
--api-key-file, else $OPENAI_API_KEY), --external-url as the sandboxes
reach it; --resume needs the same --agent-cmd again.

The backend is -e, else $BERTH_BACKEND, else $HARBOR_ENV_TYPE, else local. Creates respect the
provider's limits from the registry (--max-creates-in-flight overrides).
Infrastructure errors (unavailable, throttled) are retried up to
--max-retries times with backoff; agent and verifier timeouts never are.

On the local provider, trials find their sandbox started ahead: after the
first trial it keeps 2 ready, which take any image (BERTH_POOL_SIZE, 0 turns
it off), so a trial waits milliseconds for it.

Ctrl-C stops starting trials, tears down every sandbox, marks the rest
cancelled and writes result.json; a second Ctrl-C does not skip teardown.
A job that was interrupted, even by kill -9, continues with --resume.`,
		Example: `  berth run -p ./tasks -a oracle -n 8
  berth run -p ./tasks -e daytona -k 4 --job-name nightly -o ./jobs
  berth run -p ./tasks -a terminus --api-base http://127.0.0.1:8000/v1 --model Qwen/Qwen3-8B
  berth run -p ./tasks -a command --api-base http://127.0.0.1:8000/v1 --model Qwen/Qwen3-8B \
      --agent-cmd 'my-harness --model "$BERTH_MODEL" --task-file "$BERTH_INSTRUCTION_FILE"'
  berth run -p ./tasks -e e2b -a command --external-url https://llm.example.com/v1 --agent-cmd 'claude -p "$BERTH_INSTRUCTION"'
  berth run --resume ./jobs/nightly
  berth run -p ./tasks --json | jq -c 'select(.type=="trial_finished")'`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if resume == "" && cfg.TasksPath == "" {
				return usageError(errors.New("give -p DIR (a tasks directory) or --resume JOB_DIR"))
			}
			cfg.Backend = a.backendName(cfg.Backend)
			// Harbor's variable sizes every trial's disk unless the flag does.
			if v := strings.TrimSpace(a.env.Get("HARBOR_OVERRIDE_STORAGE_MB")); v != "" && !cmd.Flags().Changed("override-storage-mb") {
				mb, err := strconv.Atoi(v)
				if err != nil || mb <= 0 {
					return usageError(fmt.Errorf("HARBOR_OVERRIDE_STORAGE_MB=%q: want a positive number of MB", v))
				}
				cfg.Overrides.StorageMB = mb
			}
			hooks, err := cf.hooks(cmd.Context(), a, &cfg, &lf, resume != "")
			if err == nil && hooks == nil {
				hooks, err = lf.hooks(a, &cfg, resume != "")
			}
			if err != nil {
				return err
			}
			return a.runJob(cmd.Context(), cfg, resume, asJSON, hooks)
		}),
	}
	f := cmd.Flags()
	f.StringVarP(&cfg.TasksPath, "path", "p", "", "tasks directory (or one task)")
	f.StringVarP(&cfg.Agent, "agent", "a", "oracle", "agent: oracle (the task's solution), nop, terminus (a model through --api-base), or command (--agent-cmd, a harness in the sandbox)")
	f.StringVarP(&cfg.Backend, "env", "e", "", backendHelp)
	f.IntVarP(&cfg.NConcurrent, "n-concurrent", "n", 4, "trials at once")
	f.IntVarP(&cfg.NAttempts, "n-attempts", "k", 1, "attempts per task")
	f.IntVarP(&cfg.MaxRetries, "max-retries", "r", 0, "retries of a trial that failed on infrastructure")
	f.StringSliceVarP(&cfg.Include, "task-name", "t", nil, "include only tasks matching these globs")
	f.StringSliceVarP(&cfg.Exclude, "exclude-task-name", "x", nil, "exclude tasks matching these globs")
	f.IntVarP(&cfg.NTasks, "n-tasks", "l", 0, "run at most this many tasks")
	f.StringVarP(&cfg.JobsDir, "jobs-dir", "o", "jobs", "directory for job results")
	f.StringVar(&cfg.JobName, "job-name", "", "job name (default: the start time)")
	f.Float64Var(&cfg.TimeoutMultiplier, "timeout-multiplier", 1, "scale every task timeout")
	f.Float64Var(&cfg.Overrides.CPUs, "override-cpus", 0, "cpus for every trial")
	f.IntVar(&cfg.Overrides.MemoryMB, "override-memory-mb", 0, "memory (MB) for every trial")
	f.IntVar(&cfg.Overrides.StorageMB, "override-storage-mb", 0, "disk (MB) for every trial")
	f.IntVar(&cfg.Limits.CreateConcurrency, "max-creates-in-flight", 0, "override the provider's concurrent-create cap")
	f.IntVar(&cfg.Limits.MaxLive, "max-live", 0, "override the provider's cap on live sandboxes")
	f.BoolVar(&cfg.NoDelete, "no-delete", false, "leave sandboxes running after their trial (until their TTL)")
	f.IntVar(&cfg.MaxDownloadMB, "max-download-mb", 0, "bound on the logs one trial downloads from its sandbox, MB (0: 1024; -1: no bound)")
	f.DurationVar(&cfg.SandboxTTL, "sandbox-ttl", 0, "sandbox lifetime (default: the trial's limits plus the provider's margin; shorter is refused)")
	f.StringVar(&resume, "resume", "", "continue the job in this directory")
	f.BoolVar(&asJSON, "json", false, "print one JSON line per event on stdout")
	lf.add(f, true)
	cf.add(f, "-a command: the model endpoint's base URL as the sandboxes reach it (providers without the reverse port)")
	return cmd
}

// interruptible cancels ctx at the first Ctrl-C (or SIGTERM); later ones
// only say that teardown is still running, because skipping it would leak
// sandboxes.
func (a *app) interruptible(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		n := 0
		for range sigs {
			n++
			if n == 1 {
				fmt.Fprintln(a.stderr, "\nberth: stopping: no new trials; tearing down running sandboxes (Ctrl-C again does not skip teardown)")
				cancel()
			} else {
				fmt.Fprintln(a.stderr, "berth: still tearing down sandboxes; waiting for them to be deleted")
			}
		}
	}()
	return ctx, func() { signal.Stop(sigs); close(sigs); cancel() }
}

func (a *app) runJob(ctx context.Context, cfg job.Config, resume string, asJSON bool, hooks job.Hooks) error {
	ctx, stop := a.interruptible(ctx)
	defer stop()

	ev := a.eventSink(asJSON)
	opts := job.Options{Registry: a.reg, Env: a.env, Events: ev.event, Hooks: hooks}
	var (
		sum *job.Summary
		err error
	)
	if resume != "" {
		_, sum, err = job.Resume(ctx, resume, opts)
	} else {
		_, sum, err = job.Run(ctx, cfg, opts)
	}
	ev.close()
	if sum != nil && !asJSON {
		sum.Print(a.stdout)
	}
	if err != nil {
		if errors.Is(err, context.Canceled) && sum != nil {
			return failure(errors.New("job cancelled; continue it with --resume " + sum.Dir))
		}
		return usageError(err)
	}
	return nil
}

// eventSink shows progress: JSON lines, or a progress bar on a terminal.
type eventSink struct {
	mu   sync.Mutex
	json *json.Encoder
	bar  *progressbar.ProgressBar
	out  io.Writer
}

func (a *app) eventSink(asJSON bool) *eventSink {
	s := &eventSink{out: a.stderr}
	if asJSON {
		s.json = json.NewEncoder(a.stdout)
	}
	return s
}

func (s *eventSink) event(e job.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.json != nil {
		_ = s.json.Encode(e)
		return
	}
	switch e.Type {
	case job.EventJobStarted:
		if f, ok := s.out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			s.bar = progressbar.NewOptions(e.Total,
				progressbar.OptionSetWriter(s.out),
				progressbar.OptionSetDescription("trials"),
				progressbar.OptionShowCount(),
				progressbar.OptionSetElapsedTime(true),
				progressbar.OptionSetPredictTime(true),
				progressbar.OptionClearOnFinish(),
			)
			_ = s.bar.Set(e.Done)
		} else {
			fmt.Fprintf(s.out, "job %s: %d trials (%d already done)\n", e.Job, e.Total, e.Done)
		}
	case job.EventTrialFinished:
		if s.bar != nil {
			_ = s.bar.Add(1)
			if e.Exception != "" {
				s.bar.Describe("trials (last error: " + e.Exception + ")")
			}
			return
		}
		status := fmt.Sprintf("reward %g", e.Reward)
		if e.Exception != "" {
			status += ", " + e.Exception
		}
		fmt.Fprintf(s.out, "%s: %s\n", e.Trial, status)
	}
}

func (s *eventSink) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bar != nil {
		_ = s.bar.Finish()
	}
}
