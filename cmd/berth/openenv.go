package main

import (
	"crypto/rand"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth/harbor/task"
	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/internal/apikeys"
	"github.com/berth-sh/berth/openenv"
	"github.com/berth-sh/berth/openenv/tbench2"
	"github.com/berth-sh/berth/registry"
)

func (a *app) openenvCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "openenv",
		Short: "Serve Terminal-Bench tasks over the OpenEnv protocol, on any provider",
		Long: `OpenEnv environments backed by berth sandboxes. "berth openenv serve" is an
OpenEnv server (WebSocket /ws plus the HTTP routes) for the tbench2
environment: Harbor / Terminal-Bench 2 tasks as exec and evaluate actions,
each session in a sandbox of its own on any provider. No Python, no image
build per task. "berth openenv up" runs any OpenEnv env image's own
server in a sandbox and prints its URL.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(a.openenvServeCmd(), a.openenvUpCmd())
	return cmd
}

func (a *app) openenvServeCmd() *cobra.Command {
	var backend, addr, tasksDir, defaultTask, keyFile, logLevel string
	var maxEnvs, pool int
	var insecure bool
	var cmdTimeout, idle, ttl time.Duration
	var maxFrame int64
	cmd := &cobra.Command{
		Use:   "serve [--backend NAME] [--tasks DIR] [--addr 127.0.0.1:8000] [--max-envs N]",
		Short: "Serve the tbench2 OpenEnv environment, one sandbox per session",
		Long: `Serve OpenEnv's tbench2 environment over the tasks in --tasks (Harbor task
directories: task.toml, instruction.md, environment/, tests/, solution/).
Clients are OpenEnv's own (Tbench2Env, EnvClient) or any that speak its
protocol: WebSocket /ws (reset, step, state, close) and GET /health,
/metadata, /schema, /state, POST /reset, /step.

Each WebSocket session gets its own sandbox on the backend (--backend, else
$BERTH_BACKEND, else $HARBOR_ENV_TYPE, else local; from the started-ahead
pool on local), created at reset from the task's image, resources and
network. exec runs commands in it (cut off after --command-timeout),
evaluate runs the task's tests/test.sh as Harbor does and returns the reward
with info.harness "tests/test.sh". The tests and solution never enter the
sandbox before evaluate. The sandbox is deleted on close, on disconnect and
when the session idles past --idle-timeout; its provider-side TTL ends it if
this server dies.

At most --max-envs sessions run at once; one more is answered
CAPACITY_REACHED. The environment variables OpenEnv's own server reads set
the defaults: MAX_CONCURRENT_ENVS, TB2_COMMAND_TIMEOUT_S, TB2_DEFAULT_TASK_ID.

Listening beyond loopback needs --api-keys FILE (one key per line, mode
0600): clients then send "Authorization: Bearer KEY" or "X-API-Key: KEY".
OpenEnv's Python client sends no such header; where the network itself
keeps others out, --insecure-no-auth serves it without keys.`,
		Example: `  berth openenv serve --tasks ./terminal-bench-2 --backend local --max-envs 16
  berth openenv serve --tasks ./tasks --backend e2b --addr 127.0.0.1:8003
  # then, in Python: Tbench2Env(base_url="http://127.0.0.1:8000").sync().reset(task_id="fix-git")
  berth sandboxes reap --backend local --label berth.launcher=berth-openenv   # after a killed server`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return usageError(fmt.Errorf("--log-level %q is not debug, info, warn or error", logLevel))
			}
			log := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: lvl}))
			if err := a.openenvDefaults(f.Changed, &maxEnvs, &cmdTimeout, &defaultTask); err != nil {
				return usageError(err)
			}
			var auth openenv.Authenticator
			if keyFile != "" {
				keys, err := apikeys.Load(a.env.ExpandHome(keyFile))
				if err != nil {
					return usageError(err)
				}
				auth = keys
			} else if !loopback(addr) && !insecure {
				return usageError(fmt.Errorf("--addr %s is reachable beyond this host: pass --api-keys FILE so that only key holders can create sandboxes (or --insecure-no-auth)", addr))
			}
			tasks, err := task.LoadDir(tasksDir)
			if err != nil {
				return usageError(err)
			}
			ctx := cmd.Context()
			name := a.backendName(backend)
			knobs := map[string]string{}
			if f.Changed("pool") || !a.env.Set(registry.PoolSizeVar) {
				knobs[registry.PoolSizeVar] = strconv.Itoa(pool)
			}
			p, err := a.openWith(ctx, name, knobs)
			if err != nil {
				return err
			}
			defer p.Close()
			entry, _ := a.reg.Lookup(name)
			// Every sandbox of this server carries its id, for reaping.
			server := "openenv-" + strings.ToLower(rand.Text()[:10])
			factory, err := tbench2.NewFactory(tbench2.Options{
				Provider: p, TasksDir: tasksDir, DefaultTask: defaultTask, CommandTimeout: cmdTimeout,
				TTL: ttl, IdleTimeout: idle, TTLMargin: entry.TTLMargin, Logger: log,
				Labels: map[string]string{trial.LabelJob: server},
			})
			if err != nil {
				return usageError(err)
			}
			opts := openenv.Options{
				Factory: factory, Info: tbench2.Info(), MaxConcurrentEnvs: maxEnvs, IdleTimeout: idle,
				MaxFrameBytes: maxFrame, Auth: auth, Logger: log,
			}
			return classExit(openenv.ListenAndServe(ctx, addr, opts, func(url string) {
				fmt.Fprintf(a.stdout, "# berth openenv serve: tbench2 over %q (tasks in %s: %d; sessions at most %d); sandboxes labelled %s=%s\nexport OPENENV_ENV_URL=%s\n",
					p.Name(), tasksDir, len(tasks), maxEnvs, trial.LabelJob, server, url)
				if s, ok := a.stdout.(interface{ Sync() error }); ok {
					_ = s.Sync()
				}
			}))
		}),
	}
	a.backendFlag(cmd, &backend)
	f := cmd.Flags()
	f.StringVar(&tasksDir, "tasks", ".", "directory of Harbor task directories (a task_id is a directory name in it)")
	f.StringVar(&addr, "addr", "127.0.0.1:8000", "listen address (host:port; port 0 picks one)")
	f.IntVar(&maxEnvs, "max-envs", 8, "sessions at once; more are answered CAPACITY_REACHED ($MAX_CONCURRENT_ENVS when not given)")
	f.DurationVar(&cmdTimeout, "command-timeout", tbench2.DefaultCommandTimeout, "cut off a blocking exec after this long ($TB2_COMMAND_TIMEOUT_S seconds when not given)")
	f.StringVar(&defaultTask, "default-task", "", "task of a reset that names none ($TB2_DEFAULT_TASK_ID when not given)")
	f.DurationVar(&idle, "idle-timeout", openenv.DefaultIdleTimeout, "close a session, deleting its sandbox, after this long without a message")
	f.DurationVar(&ttl, "ttl", 0, "sandbox TTL, re-armed while its session is active (default: the idle timeout plus the longest command, verifier or build, plus the provider's margin)")
	f.IntVar(&pool, "pool", 2, "sandboxes kept started ahead of reset where the provider can (local); 0 for none")
	f.StringVar(&keyFile, "api-keys", "", "API key file, one key per line, mode 0600; required beyond loopback")
	f.BoolVar(&insecure, "insecure-no-auth", false, "listen beyond loopback without keys (anyone who reaches the address creates sandboxes)")
	f.Int64Var(&maxFrame, "max-frame-bytes", openenv.DefaultMaxFrameBytes, "largest WebSocket frame or request body accepted")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	return cmd
}

// openenvDefaults applies the variables OpenEnv's server reads to the flags
// not given.
func (a *app) openenvDefaults(changed func(string) bool, maxEnvs *int, cmdTimeout *time.Duration, defaultTask *string) error {
	if v := strings.TrimSpace(a.env.Get("MAX_CONCURRENT_ENVS")); v != "" && !changed("max-envs") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("MAX_CONCURRENT_ENVS=%q is not a positive number", v)
		}
		*maxEnvs = n
	}
	if v := strings.TrimSpace(a.env.Get("TB2_COMMAND_TIMEOUT_S")); v != "" && !changed("command-timeout") {
		s, err := strconv.ParseFloat(v, 64)
		if err != nil || s <= 0 {
			return fmt.Errorf("TB2_COMMAND_TIMEOUT_S=%q is not a positive number of seconds", v)
		}
		*cmdTimeout = time.Duration(s * float64(time.Second))
	}
	if v := strings.TrimSpace(a.env.Get("TB2_DEFAULT_TASK_ID")); v != "" && !changed("default-task") {
		*defaultTask = v
	}
	if *maxEnvs < 1 {
		return fmt.Errorf("--max-envs %d: at least one session", *maxEnvs)
	}
	if *cmdTimeout <= 0 {
		return fmt.Errorf("--command-timeout must be positive")
	}
	return nil
}
