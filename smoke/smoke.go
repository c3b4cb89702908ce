package smoke

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/berth-sh/berth/harbor/agent"
	"github.com/berth-sh/berth/harbor/task"
	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/results/layout"
	"github.com/berth-sh/berth/sandbox"
)

//go:embed builtin-task
var builtinTask embed.FS

// Connectors the smoke runner knows.
var connectors = map[string]string{
	"harbor":  "",
	"hud":     "",
	"openenv": "",
	"nemogym": "the nemogym connector is not built yet; use --connector harbor",
}

// Options configure a smoke run.
type Options struct {
	Connector string // "harbor", "openenv" or "hud"
	Backend   string // registry name
	TaskDir   string // "" runs the built-in task
	Agent     string // "golden" (oracle) or "nop"
	Registry  *registry.Registry
	Env       registry.Environ
	// ResultsDir keeps the trial directory; "" uses a temporary one that is
	// removed after a PASS.
	ResultsDir string
	// Layout is where the openenv connector's server runs: LayoutHosted
	// ("", outside the sandbox) or LayoutSandbox (inside it, reached
	// through Endpoint).
	Layout string
	// AgentBinary is the berth-agent uploaded in LayoutSandbox; "" finds
	// one (insandbox.AgentBinary).
	AgentBinary string
	// EndpointClient reaches sandbox endpoints in LayoutSandbox; nil is
	// the default client.
	EndpointClient *http.Client
	// Port is the server's port in LayoutSandbox; default 8000.
	Port int
}

// OpenEnv layouts.
const (
	LayoutHosted  = "hosted"
	LayoutSandbox = "sandbox"
)

// Exit statuses of an episode.
const (
	Submitted         = layout.ExitSubmitted
	TimeLimitExceeded = layout.ExitTimeLimitExceeded
	AgentError        = layout.ExitAgentError
)

// Report is the outcome of a smoke run.
type Report struct {
	Connector  string        `json:"connector"`
	Backend    string        `json:"backend"`
	Task       string        `json:"task"`
	Agent      string        `json:"agent"`
	SandboxID  string        `json:"sandbox_id,omitempty"`
	Phases     []Phase       `json:"phases"`
	Total      time.Duration `json:"-"`
	TotalSec   float64       `json:"total_sec"`
	Reward     float64       `json:"reward"`
	ExitStatus string        `json:"exit_status"`
	Exception  string        `json:"exception,omitempty"`
	Message    string        `json:"message,omitempty"`
	Pass       bool          `json:"pass"`
	ResultsDir string        `json:"results_dir,omitempty"`
}

// Phase is one timed phase of the episode.
type Phase struct {
	Name     string        `json:"name"`
	Duration time.Duration `json:"-"`
	Seconds  float64       `json:"seconds"`
	Ran      bool          `json:"ran"`
}

// UsageError is a problem with the request itself (connector, backend,
// credential, task): the CLI exits 2 on it.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Run runs the golden episode; log receives the driver's progress (image
// pulls and builds) and may be nil. A FAIL is a Report with Pass false, not an
// error; errors are for episodes that could not be attempted.
func Run(ctx context.Context, o Options, log *slog.Logger) (*Report, error) {
	o.Connector = strings.ToLower(o.Connector)
	if o.Connector == "" {
		o.Connector = "harbor"
	}
	msg, ok := connectors[o.Connector]
	if !ok {
		return nil, &UsageError{fmt.Errorf("unknown connector %q (known: harbor, hud, nemogym, openenv)", o.Connector)}
	}
	if msg != "" {
		return nil, &UsageError{sandbox.Errorf(sandbox.NotSupported, "%s", msg)}
	}
	if o.Agent == "" {
		o.Agent = "golden"
	}
	if o.Layout == "" {
		o.Layout = LayoutHosted
	}
	if o.Layout != LayoutHosted && o.Connector != "openenv" {
		return nil, &UsageError{fmt.Errorf("layout %q is for the openenv connector", o.Layout)}
	}
	ag, err := agent.New(o.Agent)
	if err != nil {
		return nil, &UsageError{err}
	}
	entry, err := o.Registry.Lookup(o.Backend)
	if err != nil {
		return nil, &UsageError{err}
	}
	// One sandbox: none started ahead (a pool would only be started and removed).
	prov, err := o.Registry.Open(ctx, entry.Name, o.Env.With(map[string]string{registry.PoolSizeVar: "0"}), log)
	if err != nil {
		return nil, &UsageError{err}
	}
	defer prov.Close()

	t, cleanupTask, err := loadTask(o.TaskDir, entry.DefaultImage)
	if err != nil {
		return nil, &UsageError{err}
	}
	defer cleanupTask()
	if err := t.Err(); err != nil {
		return nil, &UsageError{err}
	}

	switch o.Connector {
	case "openenv":
		return runOpenEnv(ctx, o, entry, prov, t)
	case "hud":
		return runHUD(ctx, o, entry, prov, t, log), nil
	}
	dir := o.ResultsDir
	tempResults := dir == ""
	if tempResults {
		if dir, err = os.MkdirTemp("", "berth-smoke-"); err != nil {
			return nil, err
		}
	}
	name := "smoke__" + time.Now().UTC().Format("150405")
	res := trial.Run(ctx, trial.Options{
		Task: t, Provider: prov, Agent: ag,
		Dir: filepath.Join(dir, name), TrialName: name, ID: name,
		JobID: "smoke", Attempt: 1, TTLMargin: entry.TTLMargin,
	})
	rep := report(o, entry.Name, t, res)
	if tempResults && rep.Pass {
		_ = os.RemoveAll(dir)
	} else {
		rep.ResultsDir = filepath.Join(dir, name)
	}
	return rep, nil
}

func loadTask(dir, defaultImage string) (*task.Task, func(), error) {
	if dir != "" {
		return task.Load(dir), func() {}, nil
	}
	tmp, err := os.MkdirTemp("", "berth-smoke-task-")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { _ = os.RemoveAll(tmp) }
	sub, _ := fs.Sub(builtinTask, "builtin-task")
	if err := os.CopyFS(tmp, sub); err != nil {
		cleanup()
		return nil, nil, err
	}
	for _, s := range []string{"solution/solve.sh", "tests/test.sh"} {
		_ = os.Chmod(filepath.Join(tmp, s), 0o755)
	}
	if defaultImage == "" {
		cleanup()
		return nil, nil, fmt.Errorf("the backend names no default image; pass --task with a task that sets environment.docker_image")
	}
	// The image goes into the copy's task.toml, so that what loads the task
	// from disk (the openenv connector's server) sees it too.
	tomlPath := filepath.Join(tmp, "task.toml")
	b, err := os.ReadFile(tomlPath)
	if err == nil {
		b = []byte(strings.Replace(string(b), "[environment]\n", fmt.Sprintf("[environment]\ndocker_image = %q\n", defaultImage), 1))
		err = os.WriteFile(tomlPath, b, 0o644)
	}
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return task.Load(tmp), cleanup, nil
}

func report(o Options, backend string, t *task.Task, r *trial.Result) *Report {
	rep := &Report{Connector: "harbor", Backend: backend, Task: t.Name, Agent: o.Agent, SandboxID: r.SandboxID, Reward: r.Reward()}
	if o.TaskDir == "" {
		rep.Task += " (built-in)"
	}
	create := r.EnvironmentSetup.Duration() - r.ImageResolution.Duration()
	for _, p := range []struct {
		name string
		d    time.Duration
		ran  bool
	}{
		{"image resolution", r.ImageResolution.Duration(), r.ImageResolution != nil},
		{"sandbox create", create, r.EnvironmentSetup != nil},
		{"exec", r.AgentExecution.Duration(), r.AgentExecution != nil},
		{"verifier", r.Verifier.Duration(), r.Verifier != nil},
		{"teardown", r.Teardown.Duration(), r.Teardown != nil},
	} {
		rep.Phases = append(rep.Phases, Phase{Name: p.name, Duration: p.d, Seconds: p.d.Seconds(), Ran: p.ran})
	}
	rep.Total = r.FinishedAt.Sub(r.StartedAt)
	rep.TotalSec = rep.Total.Seconds()
	rep.ExitStatus = r.ExitStatus()
	if r.ExceptionInfo != nil {
		rep.Exception = r.ExceptionInfo.ExceptionType
		rep.Message = r.ExceptionInfo.ExceptionMessage
	}
	rep.Pass = rep.Reward == 1.0 && rep.ExitStatus == Submitted
	return rep
}

// Print writes the report for a person: a header, the timed phases, then
// PASS or FAIL.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "berth smoke: connector %s, backend %s, task %s, agent %s\n", r.Connector, r.Backend, r.Task, r.Agent)
	if r.SandboxID != "" {
		fmt.Fprintf(w, "  sandbox %s\n", r.SandboxID)
	}
	for _, p := range r.Phases {
		if p.Ran {
			fmt.Fprintf(w, "  %-17s %9.3fs\n", p.Name, p.Seconds)
		} else {
			fmt.Fprintf(w, "  %-17s %10s\n", p.Name, "-")
		}
	}
	fmt.Fprintf(w, "  %-17s %9.3fs\n", "total", r.TotalSec)
	verdict := "FAIL"
	if r.Pass {
		verdict = "PASS"
	}
	fmt.Fprintf(w, "%s reward=%g exit_status=%s\n", verdict, r.Reward, r.ExitStatus)
	if r.Exception != "" {
		fmt.Fprintf(w, "  %s: %s\n", r.Exception, r.Message)
	}
	if r.ResultsDir != "" {
		fmt.Fprintf(w, "  results: %s\n", r.ResultsDir)
	}
}

// JSON renders the report as one JSON object.
func (r *Report) JSON() []byte {
	b, _ := json.Marshal(r)
	return b
}
