package rollout

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/berth-sh/berth/harbor/job"
	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/internal/atomicfile"
	"github.com/berth-sh/berth/internal/httpserve"
	"github.com/berth-sh/berth/results/layout"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/session"
)

// GymAgent names the NeMo Gym connector where a job names its agent and
// backend (config.json, result.json): Gym runs both the harness and the
// sandboxes.
const GymAgent = "nemo-gym"

// Defaults of a Gym rollout, as Miles's NeMo Gym agent function has them.
const (
	DefaultGymSampleTimeout = time.Hour
	DefaultGymAttempts      = 3
	DefaultGymBackoffMin    = time.Second
	DefaultGymBackoffMax    = 5 * time.Second
	// DefaultGymMaxReply bounds the /run reply read: it holds the whole
	// trajectory (responses_create_params.input, response.output).
	DefaultGymMaxReply = 256 << 20
)

// GymConfig is a rollout through a NeMo Gym agent server (its
// mini_swe_agent_2 agent): one POST /run per sample.
type GymConfig struct {
	// URL is the agent server's base URL (Miles's NEMO_GYM_URL, e.g.
	// http://gym-host:12000); /run is appended.
	URL string
	// TasksPath is the tasks file: JSON lines, one instance a line.
	TasksPath      string
	JobName        string
	JobsDir        string
	SamplesPerTask int // default 1
	NConcurrent    int // samples at once, default 4
	NTasks         int // run at most this many tasks (0: all)
	Sampling       Sampling
	// SampleTimeout bounds one sample's /run calls, retries included
	// (default 1 h); a sample past it is ABORTED.
	SampleTimeout time.Duration
	// Attempts of a /run that failed in transport or with a 5xx (default
	// 3). BackoffMin is the first wait between them and BackoffMax the
	// cap of the waits, which double and are jittered by half
	// (retry.Backoff; default 1 s and 5 s, NeMo Gym's own 1-5 s).
	Attempts               int
	BackoffMin, BackoffMax time.Duration
	MaxReplyBytes          int64
	// MaxSeqLen, when set, is the samples' max_seq_len.
	MaxSeqLen int
	// Strict fails the run when a gated TITO mismatch rate is not 0.
	Strict bool
}

// GymOptions are what a Gym rollout needs besides its GymConfig.
type GymOptions struct {
	// Sessions is the session server's client, as this process reaches it.
	Sessions *session.Client
	// PolicyURL is the session server's base URL as the Gym host reaches
	// it (its --external-url); "" means Sessions.BaseURL. Each sample's
	// policy_base_url is PolicyURL/sessions/<id>/v1, and Sessions.APIKey,
	// when set, its policy_api_key.
	PolicyURL string
	// HTTP makes the /run calls (none of its timeouts should be shorter
	// than a sample); nil means a client of its own.
	HTTP      *http.Client
	TokenText func(id int) string
	Events    func(job.Event)
	Logger    *slog.Logger
}

func (c *GymConfig) defaults() {
	if c.JobsDir == "" {
		c.JobsDir = "jobs"
	}
	if c.JobName == "" {
		c.JobName = time.Now().Format("2006-01-02__15-04-05")
	}
	if c.SamplesPerTask <= 0 {
		c.SamplesPerTask = 1
	}
	if c.NConcurrent <= 0 {
		c.NConcurrent = 4
	}
	if c.SampleTimeout <= 0 {
		c.SampleTimeout = DefaultGymSampleTimeout
	}
	if c.Attempts <= 0 {
		c.Attempts = DefaultGymAttempts
	}
	if c.BackoffMin <= 0 {
		c.BackoffMin = DefaultGymBackoffMin
	}
	if c.BackoffMax < c.BackoffMin {
		c.BackoffMax = max(DefaultGymBackoffMax, c.BackoffMin)
	}
	if c.MaxReplyBytes <= 0 {
		c.MaxReplyBytes = DefaultGymMaxReply
	}
}

// checkURL accepts an http(s) base URL without credentials, query or
// fragment.
func checkURL(what, raw string) (string, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return "", sandbox.Errorf(sandbox.InvalidArgument, "%s %q is not an http(s) URL", what, raw)
	case u.User != nil:
		return "", sandbox.Errorf(sandbox.InvalidArgument, "%s holds a credential; give keys in files", what)
	case u.RawQuery != "" || u.Fragment != "":
		return "", sandbox.Errorf(sandbox.InvalidArgument, "%s %q has a query or fragment", what, raw)
	}
	return strings.TrimRight(raw, "/"), nil
}

// gymJob is a running Gym rollout.
type gymJob struct {
	cfg    GymConfig
	opts   GymOptions
	dir    string
	runURL string
	policy *session.Client // PolicyURL as a client, for PolicyBaseURL
	log    *slog.Logger

	mu     sync.Mutex
	res    layout.JobResult
	done   []*trial.Result
	nRun   int
	nPend  int
	nRetry int
}

// RunGym runs a rollout through a NeMo Gym agent server to the end (or
// until ctx is cancelled: open /run calls are dropped and their sessions
// collected and deleted) and writes the job directory: config.json,
// result.json, job.log, a trial directory per sample and rollout.json.
func RunGym(ctx context.Context, cfg GymConfig, opts GymOptions) (*Result, error) {
	cfg.defaults()
	if opts.Sessions == nil || opts.Sessions.BaseURL == "" {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "a rollout needs a session server")
	}
	gymURL, err := checkURL("the Gym URL", cfg.URL)
	if err != nil {
		return nil, err
	}
	policyURL := opts.Sessions.BaseURL
	if opts.PolicyURL != "" {
		if policyURL, err = checkURL("the session server's external URL", opts.PolicyURL); err != nil {
			return nil, err
		}
	}
	if opts.HTTP == nil {
		opts.HTTP = &http.Client{Transport: httpserve.Transport()}
	}
	if err := checkName(cfg.JobName); err != nil {
		return nil, err
	}
	tasks, err := LoadGymTasks(cfg.TasksPath)
	if err != nil {
		return nil, err
	}
	if cfg.NTasks > 0 && len(tasks) > cfg.NTasks {
		tasks = tasks[:cfg.NTasks]
	}
	g := &gymJob{cfg: cfg, opts: opts, runURL: gymURL + "/run", policy: &session.Client{BaseURL: policyURL},
		dir: filepath.Join(cfg.JobsDir, cfg.JobName)}
	logFile, err := g.create()
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	g.log = slog.New(slog.NewTextHandler(logFile, nil))
	if opts.Logger != nil {
		g.log = slog.New(slog.NewMultiHandler(g.log.Handler(), opts.Logger.Handler()))
	}
	sum := g.run(ctx, tasks)
	res := &Result{Job: &g.res, Summary: sum}
	rs, serr := summarize(g.dir, cfg.Strict)
	if serr != nil {
		return res, errors.Join(ctx.Err(), serr)
	}
	res.Rollout = rs
	err = ctx.Err()
	if werr := atomicfile.WriteJSON(filepath.Join(g.dir, SummaryFile), rs); werr != nil {
		err = errors.Join(err, werr)
	}
	if err == nil && len(rs.StrictFailures) > 0 {
		err = fmt.Errorf("%w: %v", ErrStrict, rs.StrictFailures)
	}
	return res, err
}

// checkName keeps the job name one directory name.
func checkName(n string) error {
	if !filepath.IsLocal(n) || strings.ContainsAny(n, `/\`) || strings.HasPrefix(n, ".") {
		return sandbox.Errorf(sandbox.InvalidArgument, "job name %q: give one directory name", n)
	}
	return nil
}

// create makes the job directory, its config.json and job.log.
func (g *gymJob) create() (*os.File, error) {
	if _, err := os.Stat(filepath.Join(g.dir, layout.ConfigFile)); err == nil {
		return nil, sandbox.Errorf(sandbox.AlreadyExists, "job %s already exists in %s", g.cfg.JobName, g.cfg.JobsDir)
	}
	if err := os.MkdirAll(g.dir, 0o755); err != nil {
		return nil, err
	}
	tasksPath := g.cfg.TasksPath
	if abs, err := filepath.Abs(tasksPath); err == nil {
		tasksPath = abs
	}
	jc := layout.JobConfig{JobName: g.cfg.JobName, JobsDir: g.cfg.JobsDir, TasksPath: tasksPath, Agent: GymAgent, Backend: GymAgent,
		NConcurrent: g.cfg.NConcurrent, NAttempts: g.cfg.SamplesPerTask, NTasks: g.cfg.NTasks}
	if err := atomicfile.WriteJSON(filepath.Join(g.dir, layout.ConfigFile), jc); err != nil {
		return nil, err
	}
	return os.OpenFile(filepath.Join(g.dir, layout.JobLogFile), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
}

// gymSample is one planned sample.
type gymSample struct {
	task    *GymTask
	attempt int // from 1, of the task's samples
}

func (g *gymJob) run(ctx context.Context, tasks []GymTask) *job.Summary {
	var queue []gymSample
	for i := range tasks {
		for a := 1; a <= g.cfg.SamplesPerTask; a++ {
			queue = append(queue, gymSample{task: &tasks[i], attempt: a})
		}
	}
	g.res = layout.JobResult{ID: newID(), StartedAt: time.Now().UTC(), NTotalTrials: len(queue)}
	g.nPend = len(queue)
	g.log.Info("gym rollout starting", "job", g.cfg.JobName, "gym", g.runURL, "samples", len(queue), "concurrency", g.cfg.NConcurrent,
		"sample_timeout", g.cfg.SampleTimeout, "sampling", fmt.Sprintf("%+v", g.cfg.Sampling))
	g.emit(job.Event{Type: job.EventJobStarted, Total: len(queue)})
	g.update(false)

	work := make(chan gymSample)
	var wg sync.WaitGroup
	for range g.cfg.NConcurrent {
		wg.Go(func() {
			for s := range work {
				g.count(func() { g.nPend--; g.nRun++ })
				r := g.sample(ctx, s)
				g.count(func() {
					g.nRun--
					if r.ExceptionInfo != nil && r.ExceptionInfo.ExceptionType == string(trial.Cancelled) {
						g.res.Stats.NCancelled++
					} else {
						g.done = append(g.done, r)
					}
				})
			}
		})
	}
feed:
	for _, s := range queue {
		select {
		case work <- s:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	g.count(func() { g.res.Stats.NCancelled += g.nPend; g.nPend = 0 })
	g.update(true)
	sum := g.summary()
	g.emit(job.Event{Type: job.EventJobFinished, Total: len(queue), Done: len(g.done), Summary: sum})
	g.log.Info("gym rollout finished", "finished", len(g.done), "cancelled", g.res.Stats.NCancelled, "mean_reward", sum.MeanReward)
	return sum
}

// count changes the counters under the lock and rewrites result.json.
func (g *gymJob) count(f func()) {
	g.mu.Lock()
	f()
	g.mu.Unlock()
	g.update(false)
}

// update rewrites result.json with the current counts.
func (g *gymJob) update(final bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := &g.res.Stats
	s.NPending, s.NRunning, s.NRetries = g.nPend, g.nRun, g.nRetry
	s.NCompleted, s.NErrored = 0, 0
	for _, r := range g.done {
		if r.ExceptionInfo != nil {
			s.NErrored++
		} else {
			s.NCompleted++
		}
	}
	g.res.UpdatedAt = time.Now().UTC()
	if final {
		g.res.FinishedAt = g.res.UpdatedAt
	}
	if err := atomicfile.WriteJSON(filepath.Join(g.dir, layout.ResultFile), &g.res); err != nil {
		g.log.Error("writing "+layout.ResultFile, "error", err)
	}
}

// summary is the closing report: rewards, errors, the /run time.
func (g *gymJob) summary() *job.Summary {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := &job.Summary{Errors: map[string]int{}, Phases: map[string]job.PhaseStats{}, Dir: g.dir,
		Cancelled: g.res.Stats.NCancelled, Retries: g.nRetry}
	var runs []time.Duration
	total := 0.0
	for _, r := range g.done {
		s.Trials++
		total += r.Reward()
		if r.Reward() >= 1 {
			s.Passed++
		}
		if r.ExceptionInfo != nil {
			s.Errors[r.ExceptionInfo.ExceptionType]++
		}
		if d := r.AgentExecution.Duration(); d > 0 {
			runs = append(runs, d)
		}
	}
	if s.Trials > 0 {
		s.MeanReward = total / float64(s.Trials)
	}
	if len(runs) > 0 {
		slices.Sort(runs)
		at := func(q float64) float64 { return runs[int(float64(len(runs)-1)*q+0.5)].Seconds() }
		s.Phases[layout.PhaseAgent] = job.PhaseStats{P50: at(0.5), P95: at(0.95)}
	}
	return s
}

func (g *gymJob) emit(e job.Event) {
	if g.opts.Events != nil {
		e.Time, e.Job = time.Now().UTC(), g.cfg.JobName
		g.opts.Events(e)
	}
}

// newID is a random id for result.json.
func newID() string { return strings.ToLower(rand.Text()) }
