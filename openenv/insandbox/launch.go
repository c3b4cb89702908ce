package insandbox

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/berth-sh/berth/harbor/task"
	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/openenv"
	"github.com/berth-sh/berth/openenv/tbench2"
	"github.com/berth-sh/berth/openenv/up"
	"github.com/berth-sh/berth/sandbox"
)

// Where the launcher puts things in the sandbox.
const (
	DefaultPort = up.DefaultPort
	// AgentDir holds the agent binary and the tasks, root only.
	AgentDir   = "/opt/berth-openenv"
	agentPath  = AgentDir + "/berth-agent"
	tasksDir   = AgentDir + "/tasks"
	agentName  = "berth-agent"
	agentVarBn = "BERTH_AGENT_BINARY"
)

// LaunchOptions say which task to serve from which sandbox.
type LaunchOptions struct {
	Provider *sandbox.Provider
	// Task is the task on the launcher's side; required.
	Task *task.Task
	// AgentBinary is a static berth-agent for the sandbox's architecture;
	// "" finds one (AgentBinary).
	AgentBinary string
	// Port is the server's port in the sandbox; default DefaultPort.
	Port int
	// CommandTimeout is TB2_COMMAND_TIMEOUT_S; default the tbench2 one.
	CommandTimeout time.Duration
	// TTL is the sandbox's, re-armed by Keep; zero derives it as the
	// hosted server does. TTLMargin is the provider's.
	TTL, TTLMargin time.Duration
	Labels         map[string]string
	Overrides      trial.Overrides
	// Ready bounds the wait for the server's health (up.DefaultReady).
	Ready      time.Duration
	HTTPClient *http.Client
	Logger     *slog.Logger
}

// Env is the tbench2 server running in a task's sandbox.
type Env struct {
	*up.Env
	key string
}

// AgentBinary finds the berth-agent to upload: $BERTH_AGENT_BINARY, else
// berth-agent beside the running binary.
func AgentBinary() (string, error) {
	if p := os.Getenv(agentVarBn); p != "" {
		return p, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	p := filepath.Join(filepath.Dir(exe), agentName)
	if filepath.Base(exe) == agentName {
		p = exe
	}
	if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
		return "", sandbox.Errorf(sandbox.InvalidArgument, "no %s beside %s to run in the sandbox; build it (CGO_ENABLED=0 go build ./cmd/berth-agent) or set %s", agentName, exe, agentVarBn)
	}
	return p, nil
}

// Launch creates the task's sandbox and starts the tbench2 server in it.
func Launch(ctx context.Context, o LaunchOptions) (*Env, error) {
	if o.Provider == nil || o.Task == nil {
		return nil, errors.New("insandbox: a provider and a task are required")
	}
	t := o.Task
	if err := t.Err(); err != nil {
		return nil, err
	}
	bin := o.AgentBinary
	if bin == "" {
		var err error
		if bin, err = AgentBinary(); err != nil {
			return nil, err
		}
	}
	if o.CommandTimeout <= 0 {
		o.CommandTimeout = tbench2.DefaultCommandTimeout
	}
	if o.Port == 0 {
		o.Port = DefaultPort
	}
	id := filepath.Base(t.Dir)
	spec := trial.TaskSpec(t, o.Overrides)
	spec.TTL = o.TTL
	if spec.TTL <= 0 {
		spec.TTL = openenv.DefaultIdleTimeout + max(o.CommandTimeout, t.VerifierTimeout, t.BuildTimeout) + o.TTLMargin + time.Minute
	}
	if m := o.Provider.Capabilities().MaxTTL; m > 0 && spec.TTL > m {
		spec.TTL = m
	}
	spec.Labels = maps.Clone(o.Labels)
	if spec.Labels == nil {
		spec.Labels = map[string]string{}
	}
	spec.Labels[trial.LabelLauncher] = tbench2.Launcher
	spec.Labels[trial.LabelTask] = trial.LabelValue(id)
	key := rand.Text() // 130 random bits
	cmd := fmt.Sprintf("exec %s openenv --tasks %s --default-task %s --addr 0.0.0.0:%d --command-timeout %s",
		agentPath, tasksDir, tbench2.ShellQuote(id), o.Port, o.CommandTimeout)
	e, err := up.Start(ctx, up.Options{
		Provider: o.Provider, Spec: spec, Port: o.Port, Command: cmd, Env: map[string]string{KeyVar: key},
		Ready: o.Ready, HTTPClient: o.HTTPClient, Logger: o.Logger,
		Stage: func(ctx context.Context, sb *sandbox.Sandbox) error { return stage(ctx, sb, bin, t.Dir, id) },
	})
	if err != nil {
		return nil, err
	}
	return &Env{Env: e, key: key}, nil
}

// stage uploads the agent and the task without its solution.
func stage(ctx context.Context, sb *sandbox.Sandbox, bin, dir, id string) error {
	f, err := os.Open(bin)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := sb.MakeDir(ctx, AgentDir); err != nil && !errors.Is(err, sandbox.ErrAlreadyExists) {
		return err
	}
	if err := sb.WriteFrom(ctx, agentPath, f, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	dst := path.Join(tasksDir, id)
	for _, ent := range ents {
		if ent.Name() == "solution" {
			continue
		}
		src := filepath.Join(dir, ent.Name())
		switch {
		case ent.IsDir():
			err = sb.UploadDir(ctx, src, path.Join(dst, ent.Name()))
		case ent.Type().IsRegular():
			var b []byte
			if b, err = os.ReadFile(src); err == nil {
				err = sb.WriteFile(ctx, path.Join(dst, ent.Name()), b, 0o644)
			}
		}
		if err != nil {
			return fmt.Errorf("upload %s: %w", ent.Name(), err)
		}
	}
	res, err := sb.Run(ctx, sandbox.Command{Args: []string{"chmod", "-R", "go-rwx", AgentDir}, Timeout: time.Minute})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("chmod %s exited %d", AgentDir, res.ExitCode)
	}
	return err
}

// Header is the endpoint's headers and the server's key.
func (e *Env) Header() http.Header {
	h := e.Env.Header()
	h.Set(KeyHeader, e.key)
	return h
}

// Client is an OpenEnv client of the server; o's Header is replaced.
func (e *Env) Client(o openenv.ClientOptions) (*openenv.Client, error) {
	o.Header = e.Header()
	return openenv.NewClient(e.Endpoint().URL, o)
}
