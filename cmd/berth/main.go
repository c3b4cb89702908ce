package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth/builtin"
	"github.com/berth-sh/berth/registry"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2 // usage errors and missing or refused credentials
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, registry.OSEnviron()))
}

var registerOnce sync.Once

// providers returns the registry with the providers this binary ships. This
// is the one place that picks them.
func providers() *registry.Registry {
	registerOnce.Do(func() { builtin.Register(registry.Default) })
	return registry.Default
}

// app is what every verb works with; tests build one with their own
// streams and environment.
type app struct {
	reg            *registry.Registry
	env            registry.Environ
	stdin          io.Reader
	stdout, stderr io.Writer
	euid           func() int // the effective user id, for root requirements
}

// run executes one berth command line and returns the process exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer, env registry.Environ) int {
	a := &app{
		reg:    providers(),
		env:    env,
		stdin:  stdin,
		stdout: stdout,
		stderr: stderr,
		euid:   os.Geteuid,
	}
	// SIGTERM ends a command as Ctrl-C does (teardown runs). It is caught
	// here, before any command prints an address a caller may answer with
	// SIGTERM at once, so no command dies with its sandbox still up.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return a.execute(ctx, args)
}

func (a *app) execute(ctx context.Context, args []string) int {
	root := a.rootCmd()
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(a.stderr, "berth: %v\n", err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	// Anything else came from cobra itself: a bad flag, a missing required
	// flag, an unknown verb, stray arguments.
	if cmd == nil {
		cmd = root
	}
	fmt.Fprintf(a.stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	return exitUsage
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "berth",
		Short: "Sandboxes for agent tasks from any provider",
		Long: `berth gives agent tasks a sandbox from any provider (local, E2B, AgentENV,
Daytona, Modal) through one registry, and runs them.

Credentials live in a key file or in the environment, never on the command
line: see "berth providers" for where each provider looks, and "berth env"
for the environment a worker needs.`,
		Example: `  berth providers
  berth env --backend e2b
  berth doctor --backend modal`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	a.runtimeFlag(root)
	root.AddCommand(
		a.providersCmd(),
		a.envCmd(),
		a.doctorCmd(),
		a.versionCmd(),
		a.sandboxesCmd(),
		a.execCmd(),
		a.cpCmd(),
		a.portCmd(),
		a.forwardCmd(),
		a.tasksCmd(),
		a.runCmd(),
		a.smokeCmd(),
		a.serveCmd(),
		a.openenvCmd(),
		a.hudCmd(),
		a.agentCmd(),
		a.k8sAgentCmd(),
		a.imageCmd(),
		a.viewCmd(),
		a.reportCmd(),
		a.sessionServerCmd(),
		a.rolloutCmd(),
	)
	return root
}

// exitError carries the exit code of a failed verb.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageError marks err as a usage or credential error (exit 2).
func usageError(err error) error { return &exitError{code: exitUsage, err: err} }

// failure marks err as a plain failure (exit 1).
func failure(err error) error { return &exitError{code: exitFailure, err: err} }

// runE adapts a verb: an error without an exit code is a failure, so that
// only cobra's own parse errors count as usage errors.
func runE(f func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		err := f(cmd, args)
		var ee *exitError
		if err != nil && !errors.As(err, &ee) {
			return failure(err)
		}
		return err
	}
}
