package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/sandbox"
)

// backendHelp is how every verb's provider flag states the one default
// rule (registry.Backend).
const backendHelp = "provider name or alias (default $BERTH_BACKEND, else $HARBOR_ENV_TYPE, else local)"

// backendFlag adds --backend with the default every verb shares.
func (a *app) backendFlag(cmd *cobra.Command, backend *string) {
	cmd.Flags().StringVar(backend, "backend", "", backendHelp)
	_ = cmd.RegisterFlagCompletionFunc("backend", a.completeBackend)
}

// runtimeFlag adds the global --runtime: the local provider's OCI runtime
// (runsc runs sandboxes under gVisor), over $BERTH_RUNTIME. It is set in
// the environment every verb reads (a.env) before any verb runs, so that
// whatever opens the local provider (the sandbox verbs, run, smoke, serve,
// openenv, rollout, hud) sees it, and no verb has a flag of its own.
func (a *app) runtimeFlag(root *cobra.Command) {
	var rt string
	root.PersistentFlags().StringVar(&rt, "runtime", "", "OCI runtime of the local provider: runc, crun, or runsc for gVisor (default $"+local.EnvRuntime+", else runc)")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if rt != "" {
			a.env = a.env.With(map[string]string{local.EnvRuntime: rt})
		}
		return nil
	}
}

// backendName is the provider a verb uses: registry.Backend, the one rule.
func (a *app) backendName(flag string) string { return registry.Backend(flag, a.env) }

// open resolves the provider's credential the way a worker does and opens
// it for a one-shot command: no sandboxes started ahead, which the command
// would only start and remove. An unknown backend or a missing credential
// is a usage error (exit 2).
func (a *app) open(ctx context.Context, backend string) (*sandbox.Provider, error) {
	return a.openWith(ctx, backend, map[string]string{registry.PoolSizeVar: "0"})
}

// openWith is open with launcher knobs (registry.PoolSizeVar) set on top
// of the environment.
func (a *app) openWith(ctx context.Context, backend string, knobs map[string]string) (*sandbox.Provider, error) {
	log := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p, err := a.reg.Open(ctx, a.backendName(backend), a.env.With(knobs), log)
	if err != nil {
		if c := sandbox.ClassOf(err); c == sandbox.NotFound || c == sandbox.Unauthenticated || c == sandbox.InvalidArgument {
			return nil, usageError(err)
		}
		return nil, err
	}
	return p, nil
}

// classExit maps an error onto an exit status: bad input is a usage error.
func classExit(err error) error {
	if err == nil {
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	if sandbox.ClassOf(err) == sandbox.InvalidArgument {
		return usageError(err)
	}
	return failure(err)
}
