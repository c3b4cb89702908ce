package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/berth-sh/berth/openenv/insandbox"
	"github.com/berth-sh/berth/openenv/tbench2"
)

var errUsage = errors.New("usage")

// serveOpenEnv is `berth-agent openenv`: the tbench2 server over the
// sandbox it runs in, as insandbox.Launch starts it.
func serveOpenEnv(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("openenv", flag.ContinueOnError)
	var o insandbox.ServeOptions
	fs.StringVar(&o.TasksDir, "tasks", "", "directory of Harbor task directories")
	fs.StringVar(&o.DefaultTask, "default-task", os.Getenv("TB2_DEFAULT_TASK_ID"), "task of a reset that names none")
	fs.StringVar(&o.Addr, "addr", "0.0.0.0:8000", "listen address")
	fs.IntVar(&o.MaxEnvs, "max-envs", 1, "sessions at once")
	fs.DurationVar(&o.CommandTimeout, "command-timeout", tbench2.DefaultCommandTimeout, "cut off a blocking exec after this long")
	fs.DurationVar(&o.IdleTimeout, "idle-timeout", 0, "close a session after this long without a message (default: OpenEnv's)")
	if fs.Parse(args) != nil || fs.NArg() != 0 || o.TasksDir == "" {
		return errUsage
	}
	// The key stays out of the environment the episode's commands inherit.
	o.Key = os.Getenv(insandbox.KeyVar)
	os.Unsetenv(insandbox.KeyVar)
	o.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM)
	defer stop()
	return insandbox.Serve(ctx, o, func(url string) { fmt.Fprintf(os.Stderr, "berth-agent: serving tbench2 at %s\n", url) })
}
