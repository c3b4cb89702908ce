package tbench2

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/berth-sh/berth/harbor/task"
	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/openenv"
	"github.com/berth-sh/berth/sandbox"
	"golang.org/x/sync/errgroup"
)

// Defaults of Options.
const (
	// DefaultCommandTimeout is TB2_COMMAND_TIMEOUT_S's value in Miles'
	// sandbox recipe.
	DefaultCommandTimeout = 900 * time.Second
	DefaultMaxOutputBytes = 1 << 20
	DefaultMaxSessions    = 16
)

// LabelEpisode marks a sandbox with the episode it serves; the launcher
// label is "berth-openenv".
const (
	LabelEpisode = "berth.episode"
	Launcher     = "berth-openenv"
)

// Options configure the environment.
type Options struct {
	// Provider creates the sandboxes; required.
	Provider *sandbox.Provider
	// TasksDir holds the task directories reset chooses from; required.
	TasksDir string
	// DefaultTask is the task of a reset that names none
	// (TB2_DEFAULT_TASK_ID).
	DefaultTask string
	// CommandTimeout cuts off a blocking exec (TB2_COMMAND_TIMEOUT_S);
	// default DefaultCommandTimeout.
	CommandTimeout time.Duration
	// TTL is each sandbox's provider-side lifetime, re-armed while its
	// session is active. Zero derives it: the session idle timeout plus the
	// longest single operation (command, verifier, build) plus TTLMargin.
	TTL, IdleTimeout, TTLMargin time.Duration
	// Labels are added to every sandbox (a server's own id, for reaping).
	Labels map[string]string
	// Overrides replace the tasks' resources when set.
	Overrides trial.Overrides
	// MaxOutputBytes bounds the output of one action; MaxSessions the
	// background sessions of one episode.
	MaxOutputBytes, MaxSessions int
	Logger                      *slog.Logger
}

// NewFactory checks the options and returns the factory of the server's
// sessions; making an Env creates nothing until its reset.
func NewFactory(o Options) (openenv.Factory, error) {
	if o.Provider == nil {
		return nil, errors.New("tbench2: a provider is required")
	}
	dir, err := filepath.Abs(o.TasksDir)
	if err == nil {
		dir, err = filepath.EvalSymlinks(dir)
	}
	if err != nil {
		return nil, fmt.Errorf("tbench2: tasks directory: %w", err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("tbench2: tasks directory %s is not a directory", o.TasksDir)
	}
	o.TasksDir = dir
	if o.CommandTimeout <= 0 {
		o.CommandTimeout = DefaultCommandTimeout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = openenv.DefaultIdleTimeout
	}
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return func(context.Context) (openenv.Env, error) { return &Env{o: &o}, nil }, nil
}

// Env is one episode's environment: at most one sandbox at a time.
type Env struct {
	o *Options

	task        *task.Task
	sb          *sandbox.Sandbox
	shell       string // bash, or sh where the image has no bash
	workdir     string // where commands run
	ttl         time.Duration
	armed       time.Time
	instruction string
	state       State
	sessions    map[string]*session
}

var _ openenv.Env = (*Env)(nil)

// wireError is an error whose text is OpenEnv's own, word for word.
type wireError string

func (e wireError) Error() string { return string(e) }

// errNotReady is OpenEnv's text for a step before reset.
const errNotReady = wireError("TB2 environment not initialized. Call reset() first.")

func argString(args map[string]json.RawMessage, names ...string) (string, error) {
	for _, n := range names {
		raw, ok := args[n]
		if !ok || string(raw) == "null" {
			continue
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("reset: %s must be a string", n)
		}
		if s != "" {
			return s, nil
		}
	}
	return "", nil
}

// Reset creates a sandbox for the task args name.
func (e *Env) Reset(ctx context.Context, args map[string]json.RawMessage) (*openenv.Observation, error) {
	taskID, err := argString(args, "task_id", "task_name")
	if err != nil {
		return nil, err
	}
	taskPath, err := argString(args, "task_path", "path")
	if err != nil {
		return nil, err
	}
	episode, err := argString(args, "episode_id")
	if err != nil {
		return nil, err
	}
	dir, err := e.resolve(taskID, taskPath)
	if err != nil {
		return nil, err
	}
	t := task.Load(dir)
	if err := t.Err(); err != nil {
		return nil, err
	}
	e.teardown(ctx) // a second reset starts over
	if episode == "" {
		episode = rand.Text()
	}
	id := filepath.Base(dir)
	if taskID == "" {
		taskID = id
	}
	rel, _ := filepath.Rel(e.o.TasksDir, dir)

	spec := trial.TaskSpec(t, e.o.Overrides)
	e.ttl = e.o.TTL
	if e.ttl <= 0 {
		e.ttl = e.o.IdleTimeout + max(e.o.CommandTimeout, t.VerifierTimeout, t.BuildTimeout) + e.o.TTLMargin + time.Minute
	}
	if m := e.o.Provider.Capabilities().MaxTTL; m > 0 && e.ttl > m {
		e.ttl = m
	}
	spec.TTL = e.ttl
	spec.Labels = maps.Clone(e.o.Labels)
	if spec.Labels == nil {
		spec.Labels = map[string]string{}
	}
	spec.Labels[trial.LabelLauncher] = Launcher
	spec.Labels[trial.LabelTask] = trial.LabelValue(id)
	spec.Labels[LabelEpisode] = trial.LabelValue(truncate(episode, 128))
	sb, err := e.o.Provider.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	e.sb, e.task, e.armed = sb, t, time.Now()
	// The probe reads only what the image has, so it runs beside the
	// task's preparation: a round trip less on every reset.
	var g errgroup.Group
	g.Go(func() error { return trial.Prepare(ctx, sb, t) })
	g.Go(func() error { return e.probe(ctx) })
	if err := g.Wait(); err != nil {
		e.teardown(ctx)
		return nil, err
	}
	e.instruction = t.Instruction
	e.state = State{EpisodeID: &episode, TaskID: taskID, TaskPath: rel, TerminalReady: true}
	e.o.Logger.Info("episode started", "task", id, "sandbox", sb.ID(), "provider", sb.Provider())
	reward := 0.0
	return &openenv.Observation{Reward: &reward, Fields: Observation{
		Instruction: e.instruction, Success: true, TaskID: taskID, TaskPath: rel, ActionType: "reset",
		Info: map[string]any{"sandbox_id": sb.ID(), "provider": sb.Provider()},
	}}, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// resolve finds the task directory, inside the tasks directory whatever a
// client names: a task id is one path element, a task path is relative to
// the tasks directory or absolute under it, and symlinks may not lead out.
func (e *Env) resolve(taskID, taskPath string) (string, error) {
	var p string
	switch {
	case taskPath != "":
		p = taskPath
		if !filepath.IsAbs(p) {
			p = filepath.Join(e.o.TasksDir, p)
		}
	default:
		if taskID == "" {
			taskID = e.o.DefaultTask
		}
		if taskID == "" {
			return "", wireError("Provide task_id or task_path to reset TB2 environment.")
		}
		if strings.ContainsAny(taskID, `/\`) || taskID == "." || taskID == ".." || strings.ContainsRune(taskID, 0) {
			return "", fmt.Errorf("task id %q is not a task directory name", taskID)
		}
		p = filepath.Join(e.o.TasksDir, taskID)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", wireError("Task path not found: " + shown(taskID, taskPath))
	}
	rel, err := filepath.Rel(e.o.TasksDir, real)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("task %s is not inside the tasks directory", shown(taskID, taskPath))
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return "", wireError("Task path not found: " + shown(taskID, taskPath))
	}
	return real, nil
}

func shown(id, p string) string {
	if p != "" {
		return fmt.Sprintf("%q", p)
	}
	return fmt.Sprintf("%q", id)
}

// Step carries out one action; its failures are observations.
func (e *Env) Step(ctx context.Context, raw json.RawMessage) (*openenv.Observation, error) {
	a := Action{ActionType: ActionExec, Block: true}
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, err
	}
	if e.sb == nil {
		return nil, errNotReady
	}
	e.state.StepCount++
	e.state.LastActionType, e.state.LastCommand = a.ActionType, a.Command
	e.keepalive(ctx)

	session := DefaultSession
	if a.SessionID != nil && *a.SessionID != "" {
		session = *a.SessionID
	}
	r := e.act(ctx, a, session)
	if ctx.Err() != nil {
		return nil, ctx.Err() // the session is ending; nobody reads this
	}
	e.state.LastOutput, e.state.SessionID = r.output, session
	obs := Observation{
		Instruction: e.instruction, Output: r.output, Success: r.err == nil,
		TaskID: e.state.TaskID, TaskPath: e.state.TaskPath, SessionID: &session, ActionType: a.ActionType, Info: r.info,
	}
	if r.err != nil {
		obs.Error = r.err.Error()
	}
	if obs.Info == nil {
		obs.Info = map[string]any{}
	}
	return &openenv.Observation{Fields: obs, Reward: r.reward, Done: r.done}, nil
}

// outcome is what one action produced.
type outcome struct {
	output string
	info   map[string]any
	reward *float64
	done   bool
	err    error
}

func (e *Env) act(ctx context.Context, a Action, session string) outcome {
	needSession := func() error {
		if a.SessionID == nil || *a.SessionID == "" {
			return fmt.Errorf("session_id is required for action_type='%s'", a.ActionType)
		}
		return nil
	}
	switch a.ActionType {
	case ActionExec:
		if !a.Block {
			return e.start(ctx, session, a.Command)
		}
		return e.exec(ctx, a.Command)
	case ActionWrite, ActionView, ActionWait, ActionKill:
		if err := needSession(); err != nil {
			return outcome{err: err}
		}
		return e.onSession(ctx, a, session)
	case ActionWriteFile:
		p := a.FilePath
		if p == "" {
			return outcome{err: errors.New("file_path is required for action_type='write_file'")}
		}
		if !strings.HasPrefix(p, "/") {
			p = path.Join(e.workdir, p)
		}
		if err := e.sb.WriteFile(ctx, p, []byte(a.Content), 0o644); err != nil {
			return outcome{err: err}
		}
		return outcome{output: "Wrote content to " + a.FilePath}
	case ActionEvaluate:
		return e.evaluate(ctx)
	case ActionClose:
		e.teardown(ctx)
		return outcome{output: "Closed TB2 environment.", done: true}
	}
	return outcome{err: wireError("Unsupported action_type: " + a.ActionType)}
}

// probe learns, in one command, where commands run (relative write_file
// paths go there) and whether the image has bash.
func (e *Env) probe(ctx context.Context) error {
	res, err := e.sb.Run(ctx, sandbox.Command{Args: []string{"sh", "-c", "pwd; command -v bash || true"}})
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
	e.workdir, e.shell = "/", "sh"
	if len(lines) > 0 && path.IsAbs(lines[0]) {
		e.workdir = lines[0]
	}
	if len(lines) > 1 && strings.HasSuffix(lines[1], "/bash") {
		e.shell = "bash"
	}
	return nil
}

// keepalive re-arms the sandbox's TTL at most every TTL/6, so that an
// active session never loses its sandbox and a dead server's sandboxes
// still end. Providers that cannot move a deadline keep the one set at
// create.
func (e *Env) keepalive(ctx context.Context) {
	if e.sb == nil || time.Since(e.armed) < e.ttl/6 {
		return
	}
	e.armed = time.Now()
	if err := e.sb.SetTimeout(ctx, e.ttl); err != nil && !errors.Is(err, sandbox.ErrNotSupported) {
		e.o.Logger.Warn("re-arming the sandbox TTL failed", "sandbox", e.sb.ID(), "error", err)
	}
}

// State is the episode's state.
func (e *Env) State(context.Context) (any, error) { return e.state, nil }

// Close deletes the sandbox.
func (e *Env) Close(ctx context.Context) error {
	e.teardown(ctx)
	return nil
}

// teardown ends the background sessions and deletes the sandbox.
func (e *Env) teardown(ctx context.Context) {
	if e.sb == nil {
		return
	}
	for _, s := range e.sessions {
		s.stop()
	}
	e.sessions = nil
	sb := e.sb
	e.sb, e.task = nil, nil
	e.state.TerminalReady = false
	// Delete runs to completion even when ctx ended.
	if err := sandbox.IgnoreNotFound(sb.Delete(ctx)); err != nil {
		e.o.Logger.Warn("deleting the episode's sandbox failed; its TTL will end it", "sandbox", sb.ID(), "error", err)
	}
	_ = sb.Close()
}
