package results

import (
	"bufio"
	"bytes"
	"encoding/json"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/berth-sh/berth/results/layout"
)

// Trial states.
const (
	StateDone       = "done"       // result.json written
	StateRunning    = "running"    // no result.json yet, job running
	StateIncomplete = "incomplete" // no result.json, job no longer running
	StateUnreadable = "unreadable" // result.json there but not readable
)

// Trial is one row of a job: what result.json says, flattened for tables.
type Trial struct {
	Name    string // directory name
	Task    string
	Attempt int
	State   string
	Problem string // why State is StateUnreadable
	Result  *layout.TrialResult

	Reward     float64 // the main reward; 0 when none (as Harbor counts it)
	Rewarded   bool    // the verifier produced rewards
	ErrorType  string  // exception type, "" when none
	ExitStatus string
	Phases     []time.Duration // by PhaseNames; -1 when the phase did not run
	Total      time.Duration
	Phase      string // the phase a running trial is in (from trial.log)
}

// Passed reports a reward of at least 1, Harbor's pass.
func (t *Trial) Passed() bool { return t.State == StateDone && t.Reward >= 1 }

// Outcome is one word for filters: pass, fail, error, running, incomplete
// or unreadable.
func (t *Trial) Outcome() string {
	switch {
	case t.State != StateDone:
		return t.State
	case t.ErrorType != "":
		return "error"
	case t.Passed():
		return "pass"
	}
	return "fail"
}

// parseTrial fills tr from the text of its result.json.
func parseTrial(tr *Trial, txt *Text) {
	tr.State = StateDone
	var r layout.TrialResult
	if msg := decodeJSON(txt, &r); msg != "" {
		tr.State, tr.Problem = StateUnreadable, "result.json: "+msg
		return
	}
	tr.Result = &r
	tr.Task = r.TaskName
	tr.Attempt = r.Config.Attempt
	tr.Reward = r.Reward()
	tr.Rewarded = r.VerifierResult != nil && len(r.VerifierResult.Rewards) > 0
	if r.ExceptionInfo != nil {
		tr.ErrorType = r.ExceptionInfo.ExceptionType
	}
	tr.ExitStatus = r.ExitStatus()
	tr.Phases = make([]time.Duration, len(PhaseNames))
	for i, p := range phaseTimings(&r) {
		tr.Phases[i] = -1
		if p != nil && !p.FinishedAt.IsZero() {
			tr.Phases[i] = p.Duration()
		}
	}
	if !r.FinishedAt.IsZero() && r.FinishedAt.After(r.StartedAt) {
		tr.Total = r.FinishedAt.Sub(r.StartedAt)
	}
}

func phaseTimings(r *layout.TrialResult) []*layout.Timing {
	return []*layout.Timing{r.EnvironmentSetup, r.AgentSetup, r.AgentExecution, r.Verifier, r.Teardown}
}

// pendingTrial is a trial directory without result.json: running, or
// left behind by a job that stopped.
func pendingTrial(t *tree, jobName, name, jobStatus string) *Trial {
	tr := &Trial{Name: name, State: StateIncomplete}
	if jobStatus == StatusRunning {
		tr.State = StateRunning
	}
	var c layout.TrialConfig
	if readJSON(t, path.Join(jobName, name, layout.ConfigFile), &c) == "" {
		tr.Task = filepath.Base(c.TaskPath)
		tr.Attempt = c.Attempt
	}
	if tr.Task == "" {
		tr.Task, _, _ = strings.Cut(name, "__")
	}
	tr.Phase = currentPhase(t, path.Join(jobName, name, layout.TrialLogFile))
	return tr
}

// currentPhase is the last phase trial.log says started.
func currentPhase(t *tree, name string) string {
	txt, err := t.readFile(name, 64<<10)
	if err != nil {
		return ""
	}
	phase := ""
	sc := bufio.NewScanner(bytes.NewReader(txt.Data))
	for sc.Scan() {
		// "<time> <phase>: start"
		_, rest, _ := strings.Cut(sc.Text(), " ")
		if p, ok := strings.CutSuffix(rest, ": start"); ok {
			phase = p
		}
	}
	return phase
}

// Span is one phase on a trial's timeline, as offsets from the trial's
// start.
type Span struct {
	Name     string
	Start    time.Duration
	Duration time.Duration
}

// Timeline lists the phases that ran, image resolution included (berth's
// part of environment setup), in order of start.
func (t *Trial) Timeline() []Span {
	r := t.Result
	if r == nil || r.StartedAt.IsZero() {
		return nil
	}
	named := []struct {
		name string
		t    *layout.Timing
	}{
		{layout.PhaseEnvironment, r.EnvironmentSetup}, {"image_resolution", r.ImageResolution},
		{layout.PhaseAgentSetup, r.AgentSetup}, {layout.PhaseAgent, r.AgentExecution},
		{layout.PhaseVerifier, r.Verifier}, {layout.PhaseTeardown, r.Teardown},
	}
	var out []Span
	for _, n := range named {
		if n.t == nil || n.t.StartedAt.IsZero() {
			continue
		}
		s := Span{Name: n.name, Start: max(n.t.StartedAt.Sub(r.StartedAt), 0)}
		if !n.t.FinishedAt.IsZero() {
			s.Duration = max(n.t.FinishedAt.Sub(n.t.StartedAt), 0)
		}
		out = append(out, s)
	}
	return out
}

// Rewards lists the verifier's rewards by name, sorted.
func (t *Trial) Rewards() []KV {
	if t.Result == nil || t.Result.VerifierResult == nil {
		return nil
	}
	return sortedKV(t.Result.VerifierResult.Rewards)
}

// KV is a named number.
type KV struct {
	Key   string
	Value float64
}

func sortedKV(m map[string]float64) []KV {
	out := make([]KV, 0, len(m))
	for k, v := range m {
		out = append(out, KV{k, v})
	}
	slices.SortFunc(out, func(a, b KV) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// jsonText pretty-prints a JSON value that is not a string; a string is
// returned as its text.
func jsonText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s
	}
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") == nil {
		return b.String()
	}
	return string(raw)
}
