package command

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/berth-sh/berth/harbor/agent"
	"github.com/berth-sh/berth/sandbox"
)

// Name and Version of the agent, as result.json's agent_info has them.
const (
	Name    = "command"
	Version = "1.0.0"
)

// Paths and limits inside the sandbox.
const (
	// LogFile holds the harness's stdout and stderr.
	LogFile = agent.AgentLogs + "/command.txt"
	// ScriptFile is the command line, written as a script.
	ScriptFile = "/installed-agent/berth-command.sh"
	// InstructionFile is the task's instruction.
	InstructionFile = "/installed-agent/instruction.md"
	// DefaultPort is the sandbox's loopback port of the reverse route.
	DefaultPort = 39217
	// maxInstructionEnv bounds BERTH_INSTRUCTION (an environment string
	// is limited to 128 KiB by Linux); longer ones are in the file only.
	maxInstructionEnv = 64 << 10
	// maxScrubBytes bounds the log read back to scrub a key from it.
	maxScrubBytes = 256 << 20
)

// Options configure the agent.
type Options struct {
	// Command is the shell command line run in the sandbox (sh).
	Command string
	// APIBase is the model's OpenAI-compatible base URL as this host
	// reaches it (…/v1 is added when missing, as OpenAI clients expect);
	// the reverse route relays to it.
	APIBase string
	// APIKey, when the endpoint needs one. Through the reverse route it
	// never enters the sandbox.
	APIKey string
	// Model, when set, is exported as BERTH_MODEL and recorded.
	Model string
	// ExternalBase, when set, is the endpoint's OpenAI base URL as the
	// sandbox reaches it on its own network; the reverse route is not used
	// and the key goes into the sandbox's environment.
	ExternalBase string
	// Port is the sandbox's port of the reverse route (default DefaultPort).
	Port int
	// HTTP, when set, carries the relay's requests to the endpoint.
	HTTP *http.Client
}

// Agent is the command agent; one value runs one trial.
type Agent struct {
	o Options

	mu       sync.Mutex
	relay    *relay
	fwd      *sandbox.Forwarding
	base     string // the OpenAI base URL the sandbox is given
	key      string // the key the sandbox is given
	route    string
	exitCode *int
}

var (
	_ agent.Agent    = (*Agent)(nil)
	_ agent.Reporter = (*Agent)(nil)
)

// Route names, as agent_result.metadata.model_route has them.
const (
	RouteReversePort = "reverse_port"
	RouteExternal    = "external_url"
)

// New checks o and returns an agent.
func New(o Options) (*Agent, error) {
	if strings.TrimSpace(o.Command) == "" {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "-a command needs a command line to run in the sandbox (--agent-cmd)")
	}
	var err error
	if o.APIBase, err = openAIBase(o.APIBase, "model endpoint"); err != nil {
		return nil, err
	}
	if o.ExternalBase != "" {
		if o.ExternalBase, err = openAIBase(o.ExternalBase, "external URL"); err != nil {
			return nil, err
		}
	}
	if o.Port == 0 {
		o.Port = DefaultPort
	}
	if err := (sandbox.Port{Number: o.Port}).Validate(); err != nil {
		return nil, err
	}
	return &Agent{o: o}, nil
}

// openAIBase checks an http(s) base URL and makes it end in /v1.
func openAIBase(raw, what string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", sandbox.Errorf(sandbox.InvalidArgument, "%s %q is not an http(s) base URL", what, redact(raw))
	}
	if u.User != nil {
		return "", sandbox.Errorf(sandbox.InvalidArgument, "%s URL holds a credential; give the key through a file or the environment instead", what)
	}
	base := strings.TrimRight(raw, "/")
	if !strings.HasSuffix(base, "/v1") {
		base += "/v1"
	}
	return base, nil
}

// redact drops a URL's user info (a key someone put there) from messages.
func redact(raw string) string {
	if i := strings.Index(raw, "@"); i >= 0 {
		if j := strings.Index(raw, "://"); j >= 0 && j < i {
			return raw[:j+3] + "…@" + raw[i+1:]
		}
		return "…"
	}
	return raw
}

// CheckRoute says whether the endpoint can reach a sandbox of a provider
// with caps: through an external URL, or through the reverse port.
func CheckRoute(provider string, caps sandbox.Capabilities, o Options) error {
	if o.ExternalBase != "" || caps.Forward {
		return nil
	}
	return noRoute(provider)
}

func noRoute(provider string) error {
	return sandbox.Errorf(sandbox.NotSupported,
		"-a command: the %s provider has no reverse port to carry the model endpoint into the sandbox; give an external URL at which its sandboxes reach the endpoint (--external-url)", provider)
}

// Name implements agent.Agent.
func (a *Agent) Name() string { return Name }

// Version implements agent.Agent.
func (a *Agent) Version() string { return Version }

// Setup implements agent.Agent: it opens the route to the endpoint and
// writes the command and the instruction into the sandbox.
func (a *Agent) Setup(ctx context.Context, env agent.Env) error {
	if err := a.openRoute(ctx, env.Sandbox); err != nil {
		return err
	}
	if err := env.Sandbox.WriteFile(ctx, InstructionFile, []byte(env.Task.Instruction), 0o644); err != nil {
		a.closeRoute()
		return &agent.SandboxError{Err: err}
	}
	if err := env.Sandbox.WriteFile(ctx, ScriptFile, []byte("#!/bin/sh\n"+a.o.Command+"\n"), 0o755); err != nil {
		a.closeRoute()
		return &agent.SandboxError{Err: err}
	}
	return nil
}

func (a *Agent) openRoute(ctx context.Context, sb *sandbox.Sandbox) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.o.ExternalBase != "" {
		a.base, a.key, a.route = a.o.ExternalBase, a.o.APIKey, RouteExternal
		return nil
	}
	r, err := newRelay(a.o.APIBase, a.o.APIKey, a.o.HTTP)
	if err != nil {
		return err
	}
	f, err := sb.Forward(ctx, a.o.Port, r.addr())
	if err != nil {
		r.close()
		if errors.Is(err, sandbox.ErrNotSupported) {
			return noRoute(sb.Provider())
		}
		return &agent.SandboxError{Err: err}
	}
	a.relay, a.fwd = r, f
	a.base, a.key, a.route = fmt.Sprintf("http://127.0.0.1:%d/v1", a.o.Port), r.token, RouteReversePort
	return nil
}

func (a *Agent) closeRoute() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fwd != nil {
		_ = a.fwd.Close()
		a.fwd = nil
	}
	if a.relay != nil {
		_ = a.relay.close()
	}
}

// env is the harness's environment.
func (a *Agent) env(t agent.Env) map[string]string {
	key := a.key
	if key == "" {
		key = "none" // OpenAI clients refuse to start without one
	}
	e := map[string]string{
		"OPENAI_API_BASE":        a.base,
		"OPENAI_BASE_URL":        a.base,
		"OPENAI_API_KEY":         key,
		"ANTHROPIC_BASE_URL":     strings.TrimSuffix(a.base, "/v1"),
		"ANTHROPIC_API_KEY":      key,
		"BERTH_INSTRUCTION_FILE": InstructionFile,
	}
	if a.o.Model != "" {
		e["BERTH_MODEL"] = a.o.Model
	}
	if len(t.Task.Instruction) <= maxInstructionEnv {
		e["BERTH_INSTRUCTION"] = t.Task.Instruction
	}
	return e
}

// Run implements agent.Agent: the harness runs until it exits or the
// agent's deadline passes; the route closes after.
func (a *Agent) Run(ctx context.Context, env agent.Env) error {
	defer a.closeRoute()
	err := agent.RunScript(ctx, env, ScriptFile, LogFile, a.env(env))
	code := 0
	var exit *agent.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.Code
		a.setExit(code)
	case err == nil:
		a.setExit(code)
	case ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded):
		// The exec itself failed: the sandbox's fault, not the harness's.
		err = &agent.SandboxError{Err: err}
	}
	if a.route == RouteExternal && a.o.APIKey != "" {
		a.scrub(context.WithoutCancel(ctx), env.Sandbox)
	}
	return err
}

func (a *Agent) setExit(code int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.exitCode = &code
}

// scrub replaces the key in the harness's log, where a harness that
// prints its environment would have put it, before the trial downloads it.
func (a *Agent) scrub(ctx context.Context, sb *sandbox.Sandbox) {
	fi, err := sb.Stat(ctx, LogFile)
	if err != nil || fi.Size > maxScrubBytes {
		if err == nil { // too big to read back: dropped rather than leaked
			_ = sb.WriteFile(ctx, LogFile, []byte("[berth: log removed: too large to scrub the API key from]\n"), 0o644)
		}
		return
	}
	b, err := sb.ReadFile(ctx, LogFile)
	if err != nil || !bytes.Contains(b, []byte(a.o.APIKey)) {
		return
	}
	_ = sb.WriteFile(ctx, LogFile, bytes.ReplaceAll(b, []byte(a.o.APIKey), []byte("[REDACTED]")), 0o644)
}

// Report implements agent.Reporter: the harness's exit code, the route
// the endpoint took and, through the relay, how many requests it made.
func (a *Agent) Report() agent.Report {
	a.mu.Lock()
	defer a.mu.Unlock()
	md := map[string]any{"model_route": a.route}
	if a.exitCode != nil {
		md["exit_code"] = *a.exitCode
	}
	if a.relay != nil {
		md["model_requests"] = a.relay.requests.Load()
	}
	rep := agent.Report{Metadata: md}
	if a.o.Model != "" {
		rep.ModelInfo = map[string]string{"name": a.o.Model}
	}
	return rep
}
