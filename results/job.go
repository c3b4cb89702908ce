package results

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/berth-sh/berth/results/layout"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Job statuses.
const (
	StatusFinished    = "finished"
	StatusRunning     = "running"
	StatusInterrupted = "interrupted" // no finished_at and no write for StaleAfter
)

// StaleAfter is how long a job without finished_at may go without
// updating result.json before it counts as interrupted rather than
// running (a killed `berth run` leaves no finished_at; --resume continues
// it).
const StaleAfter = time.Hour

// Job is one job directory: its config, its result and its trials.
type Job struct {
	Ref       Ref
	Dir       string // on disk, for display
	Config    *layout.JobConfig
	ConfigErr string
	Result    *layout.JobResult
	ResultErr string
	Status    string
	Trials    []*Trial // by task, attempt, name
	Stats     *Stats
}

// Name is the job's directory name.
func (j *Job) Name() string { return j.Ref.Name }

// Agent is the agent the job ran, from config.json.
func (j *Job) Agent() string {
	if j.Config == nil {
		return ""
	}
	return j.Config.Agent
}

// Backend is the provider the job ran on, from config.json.
func (j *Job) Backend() string {
	if j.Config == nil {
		return ""
	}
	return j.Config.Backend
}

// Live reports whether the job may still change.
func (j *Job) Live() bool { return j.Status == StatusRunning }

// Total is the number of trials the job plans (result.json), or the
// number of trial directories when that is larger or unknown.
func (j *Job) Total() int {
	n := len(j.Trials)
	if j.Result != nil && j.Result.NTotalTrials > n {
		return j.Result.NTotalTrials
	}
	return n
}

// Wall is the job's wall time so far.
func (j *Job) Wall() time.Duration {
	if j.Result == nil || j.Result.StartedAt.IsZero() {
		return 0
	}
	end := j.Result.FinishedAt
	if end.IsZero() {
		end = j.Result.UpdatedAt
	}
	if end.Before(j.Result.StartedAt) {
		return 0
	}
	return end.Sub(j.Result.StartedAt)
}

// StartedAt is when the job started, zero when unknown.
func (j *Job) StartedAt() time.Time {
	if j.Result == nil {
		return time.Time{}
	}
	return j.Result.StartedAt
}

type jobCache struct {
	mu      sync.Mutex
	entries map[string]cached
}

type cached struct {
	mod   time.Time
	size  int64
	trial *Trial
}

// Job reads a job: config.json, result.json and every trial directory.
// Unreadable pieces become messages on the job or its trials, never an
// error; the error is for a job that does not exist.
func (l *Library) Job(ctx context.Context, ref Ref) (*Job, error) {
	r, err := l.resolve(ref)
	if err != nil {
		return nil, err
	}
	j := &Job{Ref: ref, Dir: filepath.Join(r.tree.dir, ref.Name)}
	var cfg layout.JobConfig
	if msg := readJSON(r.tree, path.Join(ref.Name, layout.ConfigFile), &cfg); msg == "" {
		j.Config = &cfg
	} else {
		j.ConfigErr = msg
	}
	var res layout.JobResult
	if msg := readJSON(r.tree, path.Join(ref.Name, layout.ResultFile), &res); msg == "" {
		j.Result = &res
	} else {
		j.ResultErr = msg
	}
	j.Status = status(j.Result)

	names, err := r.tree.childDirs(ref.Name, MaxTrials)
	if err != nil {
		return nil, err
	}
	jc := l.jobCache(ref)
	j.Trials = make([]*Trial, len(names))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), max(len(names), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				j.Trials[i] = jc.trial(r.tree, ref.Name, names[i], j.Status)
			}
		}()
	}
	for i := range names {
		if ctx.Err() != nil {
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	jc.keep(names)
	slices.SortFunc(j.Trials, func(a, b *Trial) int {
		return cmp.Or(cmp.Compare(a.Task, b.Task), cmp.Compare(a.Attempt, b.Attempt), cmp.Compare(a.Name, b.Name))
	})
	j.Stats = computeStats(j.Trials)
	return j, nil
}

func (l *Library) jobCache(ref Ref) *jobCache {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := ref.String()
	jc := l.cache[key]
	if jc == nil {
		jc = &jobCache{entries: map[string]cached{}}
		l.cache[key] = jc
	}
	return jc
}

// trial returns the trial from the cache when its result.json is
// unchanged, else reads it: one open and one fstat per unchanged trial.
func (jc *jobCache) trial(t *tree, jobName, name, jobStatus string) *Trial {
	rel := path.Join(jobName, name, layout.ResultFile)
	f, fi, err := t.open(rel)
	if errors.Is(err, errdefs.ErrNotFound) {
		return pendingTrial(t, jobName, name, jobStatus)
	}
	if err != nil {
		return &Trial{Name: name, State: StateUnreadable, Problem: "result.json: " + trimPrefix(err.Error(), path.Join(jobName, name))}
	}
	defer f.Close()
	jc.mu.Lock()
	c, ok := jc.entries[name]
	jc.mu.Unlock()
	if ok && c.mod.Equal(fi.ModTime()) && c.size == fi.Size() {
		return c.trial
	}
	tr := &Trial{Name: name}
	txt, err := readText(f, fi, rel, MaxResultBytes)
	if err != nil {
		tr.State, tr.Problem = StateUnreadable, "result.json: "+err.Error()
	} else {
		parseTrial(tr, txt)
	}
	jc.mu.Lock()
	jc.entries[name] = cached{mod: fi.ModTime(), size: fi.Size(), trial: tr}
	jc.mu.Unlock()
	return tr
}

func (jc *jobCache) keep(names []string) {
	jc.mu.Lock()
	defer jc.mu.Unlock()
	live := make(map[string]bool, len(names))
	for _, n := range names {
		live[n] = true
	}
	for n := range jc.entries {
		if !live[n] {
			delete(jc.entries, n)
		}
	}
}

// readJSON decodes a bounded JSON file; the result is "" or what went wrong.
func readJSON(t *tree, name string, v any) string {
	txt, err := t.readFile(name, MaxResultBytes)
	if err != nil {
		return err.Error()
	}
	return decodeJSON(txt, v)
}

func decodeJSON(txt *Text, v any) string {
	if txt.Truncated {
		return "larger than " + sizeString(MaxResultBytes) + "; not read"
	}
	if err := json.Unmarshal(bytes.TrimSpace(txt.Data), v); err != nil {
		return "not valid JSON: " + err.Error()
	}
	return ""
}

func status(r *layout.JobResult) string {
	switch {
	case r == nil:
		return StatusInterrupted
	case !r.FinishedAt.IsZero():
		return StatusFinished
	case time.Since(r.UpdatedAt) < StaleAfter:
		return StatusRunning
	}
	return StatusInterrupted
}

// PhaseNames are the timed phases of a trial, in order.
var PhaseNames = []string{layout.PhaseEnvironment, layout.PhaseAgentSetup, layout.PhaseAgent, layout.PhaseVerifier, layout.PhaseTeardown}
