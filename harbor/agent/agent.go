package agent

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/berth-sh/berth/harbor/task"
	"github.com/berth-sh/berth/sandbox"
)

// Paths inside the sandbox, as Harbor lays them out.
const (
	LogsDir      = "/logs"
	AgentLogs    = "/logs/agent"
	VerifierLogs = "/logs/verifier"
	ArtifactLogs = "/logs/artifacts"
	TestsDir     = "/tests"
	SolutionDir  = "/solution"
)

// Env is what an agent works with.
type Env struct {
	Sandbox *sandbox.Sandbox
	Task    *task.Task
}

// Agent works on a task in a sandbox. Setup and Run get contexts that carry
// their phase's deadline; an agent that outlives it is cut off and the
// runner records a timeout. A Run error is recorded and verification still
// runs.
type Agent interface {
	Name() string
	Version() string
	Setup(ctx context.Context, env Env) error
	Run(ctx context.Context, env Env) error
}

// Factory makes an agent for one trial.
type Factory func() Agent

var builtin = map[string]Factory{
	"oracle": func() Agent { return Oracle{} },
	"golden": func() Agent { return Oracle{} }, // the smoke runner's name for it
	"nop":    func() Agent { return Nop{} },
}

// Names lists the agents that New accepts.
func Names() []string { return slices.Sorted(maps.Keys(builtin)) }

// New returns the named agent.
func New(name string) (Agent, error) {
	f, ok := builtin[strings.ToLower(strings.TrimSpace(name))]
	if !ok {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "unknown agent %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return f(), nil
}

// ExitError reports an agent command that ended with a non-zero exit code.
type ExitError struct {
	Code int
}

func (e *ExitError) Error() string { return fmt.Sprintf("agent exited with code %d", e.Code) }
