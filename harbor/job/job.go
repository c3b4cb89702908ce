package job

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"github.com/berth-sh/berth/harbor/agent"
	"github.com/berth-sh/berth/harbor/task"
	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/internal/atomicfile"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/results/layout"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/retry"
	"github.com/berth-sh/berth/sandbox/throttle"
)

// Options are what a job needs besides its Config.
type Options struct {
	// Registry resolves Config.Backend; the job opens the provider by name.
	Registry *registry.Registry
	// Env is the worker environment the provider's credential resolves from.
	Env registry.Environ
	// Events, when set, receives progress; it is called from many goroutines
	// and must be safe for concurrent use and quick.
	Events func(Event)
	// Logger receives the job's log in addition to job.log.
	Logger *slog.Logger
	// Hooks, when set, make each trial's agent instead of the built-in
	// Config.Agent, and hear of each attempt's end (a rollout opens a model
	// session per trial and collects its samples).
	Hooks Hooks
}

// Job is a running or finished job.
type Job struct {
	cfg  Config
	opts Options
	dir  string

	mu      sync.Mutex
	res     layout.JobResult
	done    []*trial.Result // finished trials (kept across resume)
	log     *slog.Logger
	logFile *os.File
	dataset string
}

// Run starts a new job in <JobsDir>/<JobName> and runs it to the end (or
// until ctx is cancelled). The returned result is also in result.json.
func Run(ctx context.Context, cfg Config, opts Options) (*layout.JobResult, *Summary, error) {
	cfg.defaults()
	if err := checkName(cfg.JobName); err != nil {
		return nil, nil, err
	}
	dir := filepath.Join(cfg.JobsDir, cfg.JobName)
	if _, err := os.Stat(filepath.Join(dir, layout.ConfigFile)); err == nil {
		return nil, nil, sandbox.Errorf(sandbox.AlreadyExists, "job %s already exists; resume it with --resume %s", cfg.JobName, dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	if abs, err := filepath.Abs(cfg.TasksPath); err == nil {
		cfg.TasksPath = abs
	}
	if err := atomicfile.WriteJSON(filepath.Join(dir, layout.ConfigFile), cfg); err != nil {
		return nil, nil, err
	}
	j := &Job{cfg: cfg, opts: opts, dir: dir, res: layout.JobResult{ID: newUUID(), StartedAt: time.Now().UTC()}}
	return j.run(ctx)
}

// Resume continues the job in dir: trials with a result are kept, the rest
// (never started, interrupted, cancelled) run again.
func Resume(ctx context.Context, dir string, opts Options) (*layout.JobResult, *Summary, error) {
	var cfg Config
	b, err := os.ReadFile(filepath.Join(dir, layout.ConfigFile))
	if err != nil {
		return nil, nil, fmt.Errorf("resume %s: %w", dir, err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, nil, sandbox.Errorf(sandbox.InvalidArgument, "resume %s: config.json: %v", dir, err)
	}
	cfg.defaults()
	j := &Job{cfg: cfg, opts: opts, dir: dir, res: layout.JobResult{ID: newUUID(), StartedAt: time.Now().UTC()}}
	// A result.json cut short by a crash is tolerated: only its id and
	// start time are kept.
	if b, err := os.ReadFile(filepath.Join(dir, layout.ResultFile)); err == nil {
		var old layout.JobResult
		if json.Unmarshal(b, &old) == nil && old.ID != "" {
			j.res.ID, j.res.StartedAt = old.ID, old.StartedAt
		}
	}
	return j.run(ctx)
}

// Compiled on first use, not at every berth process's start (the agent's too).
var safeName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`) })

func checkName(n string) error {
	if !safeName().MatchString(n) {
		return sandbox.Errorf(sandbox.InvalidArgument, "job name %q: use letters, digits, '.', '_' and '-' (at most 128)", n)
	}
	return nil
}

type planned struct {
	task    *task.Task
	attempt int
}

func (j *Job) run(ctx context.Context) (*layout.JobResult, *Summary, error) {
	var err error
	j.logFile, err = os.OpenFile(filepath.Join(j.dir, layout.JobLogFile), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, nil, err
	}
	defer j.logFile.Close()
	var w io.Writer = j.logFile
	j.log = slog.New(slog.NewTextHandler(w, nil))
	if j.opts.Logger != nil {
		j.log = slog.New(fanout{j.log.Handler(), j.opts.Logger.Handler()})
	}
	j.dataset = filepath.Base(j.cfg.TasksPath)

	selected, err := j.selectTasks()
	if err != nil {
		return nil, nil, err
	}
	if j.opts.Hooks == nil {
		if _, err := agent.New(j.cfg.Agent); err != nil {
			return nil, nil, err
		}
	}

	entry, err := j.opts.Registry.Lookup(j.cfg.Backend)
	if err != nil {
		return nil, nil, err
	}
	prov, err := j.opts.Registry.Open(ctx, j.cfg.Backend, j.opts.Env, j.log)
	if err != nil {
		return nil, nil, err
	}
	defer prov.Close()
	limits := entry.Limits
	mergeLimits(&limits, j.cfg.Limits)
	gate := throttle.New(limits)
	defer gate.Close()
	margin := j.cfg.TTLMargin
	if margin == 0 {
		margin = entry.TTLMargin
	}

	j.reapLeftovers(ctx, prov)
	queue := j.plan(selected)
	j.res.NTotalTrials = len(selected) * j.cfg.NAttempts
	j.log.Info("job starting", "job", j.cfg.JobName, "backend", prov.Name(), "trials", j.res.NTotalTrials, "to_run", len(queue), "concurrency", j.cfg.NConcurrent)
	j.emit(Event{Type: EventJobStarted, Job: j.cfg.JobName, Total: j.res.NTotalTrials, Done: len(j.done)})
	j.update(len(queue), 0, false)

	cancelled := j.runQueue(ctx, prov, gate, margin, queue)
	j.mu.Lock()
	j.res.Stats.NCancelled += cancelled
	j.mu.Unlock()
	j.update(0, 0, true)
	sum := j.summary()
	j.emit(Event{Type: EventJobFinished, Job: j.cfg.JobName, Total: j.res.NTotalTrials, Done: len(j.done), Summary: sum})
	j.log.Info("job finished", "completed", j.res.Stats.NCompleted, "errored", j.res.Stats.NErrored, "cancelled", j.res.Stats.NCancelled, "mean_reward", sum.MeanReward)
	res := j.res
	if ctx.Err() != nil {
		return &res, sum, ctx.Err()
	}
	return &res, sum, nil
}

// selectTasks loads the tasks under TasksPath and keeps those the
// filters select, at most NTasks.
func (j *Job) selectTasks() ([]*task.Task, error) {
	tasks, err := task.LoadDir(j.cfg.TasksPath)
	if err != nil {
		return nil, sandbox.Classify(sandbox.InvalidArgument, err)
	}
	var selected []*task.Task
	for _, t := range tasks {
		if j.cfg.selected(t.Name) {
			selected = append(selected, t)
		}
	}
	if j.cfg.NTasks > 0 && len(selected) > j.cfg.NTasks {
		selected = selected[:j.cfg.NTasks]
	}
	if len(selected) == 0 {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "no tasks under %s match the filters", j.cfg.TasksPath)
	}
	return selected, nil
}

// runQueue runs the queue's trials NConcurrent at a time until it is done
// or ctx ends, and returns how many it never started.
func (j *Job) runQueue(ctx context.Context, prov *sandbox.Provider, gate *throttle.Gate, margin time.Duration, queue []planned) int {
	work := make(chan planned)
	var wg sync.WaitGroup
	var running sync.Mutex
	nRunning, nPending := 0, len(queue)
	for range j.cfg.NConcurrent {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				running.Lock()
				nRunning++
				nPending--
				j.update(nPending, nRunning, false)
				running.Unlock()
				j.runTrial(ctx, prov, gate, margin, p)
				running.Lock()
				nRunning--
				j.update(nPending, nRunning, false)
				running.Unlock()
			}
		}()
	}
feed:
	for _, p := range queue {
		select {
		case work <- p:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()

	running.Lock()
	cancelled := nPending
	running.Unlock()
	return cancelled
}

func mergeLimits(base *sandbox.Limits, o sandbox.Limits) {
	if o.CreateConcurrency > 0 {
		base.CreateConcurrency = o.CreateConcurrency
	}
	if o.CreatesPerSecond > 0 {
		base.CreatesPerSecond = o.CreatesPerSecond
	}
	if o.MaxLive > 0 {
		base.MaxLive = o.MaxLive
	}
	if o.Retries != 0 {
		base.Retries = o.Retries
	}
	if o.BackoffBase > 0 {
		base.BackoffBase = o.BackoffBase
	}
	if o.BackoffMax > 0 {
		base.BackoffMax = o.BackoffMax
	}
}

// reapLeftovers deletes sandboxes a previous run of this job left behind
// (a kill -9 skips teardown; the TTL would get them, this is sooner). It
// runs on every start, resumed or not.
func (j *Job) reapLeftovers(ctx context.Context, p *sandbox.Provider) {
	infos, err := p.List(ctx, map[string]string{trial.LabelJob: j.cfg.JobName})
	if err != nil {
		j.log.Warn("listing leftover sandboxes", "error", err)
		return
	}
	for _, in := range infos {
		err := sandbox.IgnoreNotFound(p.Delete(ctx, in.ID))
		j.log.Info("deleted leftover sandbox", "id", in.ID, "error", err)
	}
	// A create cut short by the kill left a sandbox with no labels yet;
	// providers that keep local state clean those (and only those whose
	// creator is gone) in Reap.
	ids, err := p.Reap(ctx)
	for _, id := range ids {
		j.log.Info("reaped leftover sandbox", "id", id)
	}
	if err != nil {
		j.log.Warn("reaping leftovers", "error", err)
	}
}

// plan lists the trials still to run. On resume, trial directories with a
// result (other than cancelled) count as done; anything else is removed
// and run again.
func (j *Job) plan(tasks []*task.Task) []planned {
	doneByTask := map[string]int{}
	ents, _ := os.ReadDir(j.dir)
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		td := filepath.Join(j.dir, e.Name())
		r, err := readTrialResult(td)
		if err != nil || (r.ExceptionInfo != nil && r.ExceptionInfo.ExceptionType == string(trial.Cancelled)) {
			_ = os.RemoveAll(td)
			continue
		}
		doneByTask[r.TaskName]++
		j.done = append(j.done, r)
	}
	var q []planned
	for _, t := range tasks {
		for a := doneByTask[t.Name]; a < j.cfg.NAttempts; a++ {
			q = append(q, planned{task: t, attempt: a + 1})
		}
	}
	return q
}

func readTrialResult(dir string) (*trial.Result, error) {
	b, err := os.ReadFile(filepath.Join(dir, layout.ResultFile))
	if err != nil {
		return nil, err
	}
	var r trial.Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// runTrial runs a planned trial, and runs it again while its failure is
// retryable (trial.Result.Retryable: the class of an infrastructure
// failure), at most MaxRetries times, RetryBackoffMin..RetryBackoffMax
// apart (sandbox/retry).
func (j *Job) runTrial(ctx context.Context, prov *sandbox.Provider, gate *throttle.Gate, margin time.Duration, p planned) {
	if ctx.Err() != nil {
		j.cancelled()
		return
	}
	var res *trial.Result
	var dir string
	try, waiting := 0, false
	policy := retry.Policy{
		Attempts: j.cfg.MaxRetries + 1, Base: j.cfg.RetryBackoffMin, Max: j.cfg.RetryBackoffMax,
		Retryable: func(error) bool { return res.Retryable() },
		OnRetry: func(error, int, time.Duration) {
			j.log.Warn("retrying trial", "trial", res.TrialName, "exception", res.ExceptionInfo.ExceptionMessage)
			_ = os.RemoveAll(dir)
			j.mu.Lock()
			j.res.Stats.NRetries++
			j.mu.Unlock()
			waiting = true
		},
	}
	_ = retry.Do(ctx, policy, func(ctx context.Context) error {
		waiting = false
		res, dir = j.tryTrial(ctx, prov, gate, margin, p, try)
		try++
		if res.ExceptionInfo != nil {
			return errTrialFailed
		}
		return nil
	})
	if waiting {
		j.cancelled() // the wait for another try was cut short
		return
	}
	j.finish(res)
}

// errTrialFailed stands for a failed try in runTrial's retries; the
// trial's result says whether it is retried.
var errTrialFailed = errors.New("trial failed")

// cancelled counts a trial that the job's end stopped before it finished.
func (j *Job) cancelled() {
	j.mu.Lock()
	j.res.Stats.NCancelled++
	j.mu.Unlock()
}

// tryTrial runs one try of a planned trial in a directory of its own,
// which it returns with the result.
func (j *Job) tryTrial(ctx context.Context, prov *sandbox.Provider, gate *throttle.Gate, margin time.Duration, p planned, try int) (*trial.Result, string) {
	id := shortID()
	name := trialName(p.task, id)
	info := TrialInfo{Name: name, Dir: filepath.Join(j.dir, name), Task: p.task, Attempt: p.attempt, Try: try}
	ag := j.agentFor(ctx, info)
	o := trial.Options{
		Task: p.task, Provider: prov, Agent: ag,
		Dir: filepath.Join(j.dir, name), TrialName: name, ID: newUUID(),
		JobID: j.cfg.JobName, Attempt: p.attempt,
		Timeouts:  trial.Timeouts{Multiplier: j.cfg.TimeoutMultiplier},
		Overrides: j.cfg.Overrides, TTLMargin: margin, TTL: j.cfg.SandboxTTL, NoDelete: j.cfg.NoDelete,
		Gate: gate, MaxDownloadBytes: int64(j.cfg.MaxDownloadMB) << 20,
		Events: func(e trial.Event) {
			ev := Event{Type: EventPhase, Job: j.cfg.JobName, Trial: e.Trial, Task: p.task.Name, Phase: e.Phase, PhaseDone: e.Done, Seconds: e.Duration.Seconds()}
			if e.Err != nil {
				ev.Error = e.Err.Error()
			}
			j.emit(ev)
		},
	}
	j.emit(Event{Type: EventTrialStarted, Job: j.cfg.JobName, Trial: name, Task: p.task.Name})
	tctx, stop := ctx, func() {}
	if tc, ok := j.opts.Hooks.(TrialContexter); ok {
		tctx, stop = tc.TrialContext(ctx, info, ag)
	}
	res := trial.Run(tctx, o)
	if j.opts.Hooks != nil {
		j.opts.Hooks.Finished(tctx, info, ag, res)
	}
	stop()
	return res, o.Dir
}

func (j *Job) finish(r *trial.Result) {
	cancelled := r.ExceptionInfo != nil && r.ExceptionInfo.ExceptionType == string(trial.Cancelled)
	j.mu.Lock()
	if cancelled {
		j.res.Stats.NCancelled++
	} else {
		j.done = append(j.done, r)
	}
	j.mu.Unlock()
	ev := Event{Type: EventTrialFinished, Job: j.cfg.JobName, Trial: r.TrialName, Task: r.TaskName, Reward: r.Reward()}
	if r.ExceptionInfo != nil {
		ev.Exception = r.ExceptionInfo.ExceptionType
		ev.Error = r.ExceptionInfo.ExceptionMessage
	}
	j.emit(ev)
}

func (j *Job) emit(e Event) {
	e.Time = time.Now().UTC()
	if j.opts.Events != nil {
		j.opts.Events(e)
	}
}

// update rewrites result.json with the current counts.
func (j *Job) update(pending, running int, final bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := &j.res.Stats
	s.NPending, s.NRunning = pending, running
	s.NCompleted, s.NErrored = 0, 0
	for _, r := range j.done {
		if r.ExceptionInfo != nil {
			s.NErrored++
		} else {
			s.NCompleted++
		}
	}
	key := evalKey(j.cfg.Agent, j.cfg.Model, j.dataset)
	s.Evals = map[string]*layout.Eval{key: aggregate(key, j.done, j.cfg.NAttempts)}
	j.res.UpdatedAt = time.Now().UTC()
	if final {
		j.res.FinishedAt = j.res.UpdatedAt
	}
	if err := atomicfile.WriteJSON(filepath.Join(j.dir, layout.ResultFile), &j.res); err != nil {
		j.log.Error("writing result.json", "error", err)
	}
}

func trialName(t *task.Task, id string) string {
	base := filepath.Base(t.Dir)
	if len(base) > 32 {
		base = base[:32]
	}
	return base + "__" + id
}

const idAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

func shortID() string {
	b := make([]byte, 7)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = idAlphabet[int(b[i])%len(idAlphabet)]
	}
	return string(b)
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
