package job

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/berth-sh/berth/results/layout"
)

// Summary is the closing report of a job.
type Summary struct {
	Trials     int                   `json:"trials"`
	Passed     int                   `json:"passed"` // reward 1.0
	MeanReward float64               `json:"mean_reward"`
	Errors     map[string]int        `json:"errors"` // by exception type
	Cancelled  int                   `json:"cancelled"`
	Retries    int                   `json:"retries"`
	Phases     map[string]PhaseStats `json:"phases"`
	Dir        string                `json:"dir"`
	perPhase   map[string][]time.Duration
}

// PhaseStats are percentiles of one phase's duration, in seconds.
type PhaseStats struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
}

func (j *Job) summary() *Summary {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := &Summary{Errors: map[string]int{}, Phases: map[string]PhaseStats{}, Dir: j.dir,
		Cancelled: j.res.Stats.NCancelled, Retries: j.res.Stats.NRetries, perPhase: map[string][]time.Duration{}}
	sum := 0.0
	for _, r := range j.done {
		s.Trials++
		sum += r.Reward()
		if r.Reward() >= 1 {
			s.Passed++
		}
		if r.ExceptionInfo != nil {
			s.Errors[r.ExceptionInfo.ExceptionType]++
		}
		for name, t := range map[string]*layout.Timing{
			layout.PhaseEnvironment: r.EnvironmentSetup, layout.PhaseAgentSetup: r.AgentSetup,
			layout.PhaseAgent: r.AgentExecution, layout.PhaseVerifier: r.Verifier, layout.PhaseTeardown: r.Teardown,
		} {
			if t != nil && !t.FinishedAt.IsZero() {
				s.perPhase[name] = append(s.perPhase[name], t.Duration())
			}
		}
	}
	if s.Trials > 0 {
		s.MeanReward = sum / float64(s.Trials)
	}
	for name, ds := range s.perPhase {
		s.Phases[name] = PhaseStats{P50: percentile(ds, 0.50).Seconds(), P95: percentile(ds, 0.95).Seconds()}
	}
	return s
}

func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s)-1)*q + 0.5)
	return s[i]
}

var phaseOrder = []string{layout.PhaseEnvironment, layout.PhaseAgentSetup, layout.PhaseAgent, layout.PhaseVerifier, layout.PhaseTeardown}

// Print writes the summary for a person.
func (s *Summary) Print(w io.Writer) {
	fmt.Fprintf(w, "\n%d trials: %d passed, mean reward %.3f", s.Trials, s.Passed, s.MeanReward)
	if s.Cancelled > 0 {
		fmt.Fprintf(w, ", %d cancelled", s.Cancelled)
	}
	if s.Retries > 0 {
		fmt.Fprintf(w, ", %d retries", s.Retries)
	}
	fmt.Fprintln(w)
	if len(s.Errors) > 0 {
		keys := slices.Collect(maps.Keys(s.Errors))
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %d", k, s.Errors[k]))
		}
		fmt.Fprintf(w, "errors: %s\n", strings.Join(parts, ", "))
	}
	fmt.Fprintf(w, "%-18s %9s %9s\n", "phase", "p50", "p95")
	for _, p := range phaseOrder {
		if st, ok := s.Phases[p]; ok {
			fmt.Fprintf(w, "%-18s %8.3fs %8.3fs\n", p, st.P50, st.P95)
		}
	}
	fmt.Fprintf(w, "results: %s\n", s.Dir)
}
