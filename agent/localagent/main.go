package localagent

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/berth-sh/berth/agent/pid1"
	"github.com/berth-sh/berth/envd"
)

// Options configure Main; the zero value uses the provider's fds.
type Options struct {
	// ListenFD and ConfigFD override the inherited fds (tests).
	ListenFD, ConfigFD int
	// RunDir, when set, replaces the inherited fds: the agent listens on
	// RunSocket in it and reads RunConfig from it (see RunDirPath).
	RunDir string
	// Logf logs the agent's events (to the container's log file); nil is
	// the standard logger.
	Logf func(format string, args ...any)
}

// Main is the agent: it reads its Config, serves envd and TreePath on the
// inherited socket until the deadline (or, when it is not PID 1, SIGTERM
// or ctx's end), then kills what it started. As PID 1 its return ends the
// sandbox, so there nothing a process of the sandbox can send ends it.
func Main(ctx context.Context, o Options) error {
	if o.ListenFD == 0 {
		o.ListenFD = ListenFD
	}
	if o.ConfigFD == 0 {
		o.ConfigFD = ConfigFD
	}
	if o.Logf == nil {
		o.Logf = log.Printf
	}
	// Before anything else: no process of the sandbox may read or trace
	// the agent, which holds the socket and the deadline.
	if err := pid1.Harden(); err != nil {
		return err
	}
	if os.Getpid() == 1 {
		// cmd/berth cancels ctx on SIGINT, which any process of the
		// sandbox can send to pid 1 (pid1.Run drops the signal itself):
		// the agent ends at its deadline or by SIGKILL from the host.
		ctx = context.WithoutCancel(ctx)
	}
	// Before the config: a pooled agent does this ahead of its Create.
	limitProcs()
	reserveThreads(spareThreads)
	budget := newThreadBudget()
	var cfg Config
	var err error
	if o.RunDir != "" {
		cfg, err = ReadConfigFile(filepath.Join(o.RunDir, RunConfig))
	} else {
		cfg, err = ReadConfig(o.ConfigFD)
	}
	if err != nil {
		return err
	}
	env, err := cfg.apply(os.Environ())
	if err != nil {
		return err
	}
	var ln net.Listener
	if o.RunDir != "" {
		ln, err = net.Listen("unix", filepath.Join(o.RunDir, RunSocket))
	} else {
		ln, err = pid1.ListenerFromFD(o.ListenFD)
	}
	if err != nil {
		return err
	}
	srv, err := envd.NewServer(envd.ServerOptions{
		AccessToken: cfg.Token,
		DefaultUser: cfg.User,
		DefaultDir:  cfg.Dir,
		// The init's environment is the image's and the Spec's (or
		// cfg.Env's); the token never was in it.
		Env:      env,
		Blocking: budget.short,
		// Under the sandbox's memory limit the OOM killer takes a command,
		// not the agent (and the sandbox with it).
		CommandOOMScoreAdj: envd.MaxOOMScoreAdj,
	})
	if err != nil {
		ln.Close()
		return fmt.Errorf("agent: %w", err)
	}
	defer srv.Close()
	mux := http.NewServeMux()
	mux.Handle(TreePath, newTreeServer(cfg.Token, cfg.User, budget))
	newPortServer(cfg.Token).routes(mux)
	mux.Handle("/", srv)
	err = pid1.Run(ctx, pid1.Options{Listener: ln, Handler: mux, Deadline: cfg.Deadline, Token: cfg.Token, Logf: o.Logf})
	if errors.Is(err, pid1.ErrDeadline) {
		return nil // the sandbox's TTL ended: a normal end
	}
	return err
}
