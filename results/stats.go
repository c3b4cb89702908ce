package results

import (
	"cmp"
	"math"
	"slices"
	"strconv"
)

// Stats summarise a job's trials.
type Stats struct {
	Trials     int // trial directories
	Done       int // with a result
	Running    int
	Incomplete int
	Unreadable int
	Passed     int // reward >= 1
	Errored    int
	MeanReward float64 // over finished trials; a missing reward counts 0
	PassRate   float64 // Passed / Done
	Errors     []Count // by exception type, most frequent first
	Rewards    []float64
	Phases     []PhaseStats // by PhaseNames, then total
	Tasks      []TaskStats  // by task name
	// PassAtK is the mean over tasks of the unbiased pass@k, for k = 1, 2,
	// 4, ... up to the most attempts of a task (tasks with fewer attempts
	// than k are left out of that mean).
	PassAtK []KV
	// Ks are the k values of PassAtK, for table headers.
	Ks []int
}

// Count is a name with how often it occurred.
type Count struct {
	Name string
	N    int
}

// PhaseStats are the durations of one phase across trials, in seconds.
type PhaseStats struct {
	Name     string
	Seconds  []float64 // sorted
	P50, P95 float64
}

// TaskStats aggregate the attempts of one task.
type TaskStats struct {
	Task       string
	Attempts   int
	Passed     int
	MeanReward float64
	Errors     int
	// PassAtK by Stats.Ks; NaN where the task has fewer attempts than k.
	PassAtK []float64
}

func computeStats(trials []*Trial) *Stats {
	s := &Stats{Trials: len(trials)}
	errs := map[string]int{}
	phases := make([][]float64, len(PhaseNames)+1)
	tasks := map[string]*TaskStats{}
	sum := 0.0
	for _, t := range trials {
		switch t.State {
		case StateRunning:
			s.Running++
			continue
		case StateIncomplete:
			s.Incomplete++
			continue
		case StateUnreadable:
			s.Unreadable++
			continue
		}
		s.Done++
		sum += t.Reward
		s.Rewards = append(s.Rewards, t.Reward)
		if t.Passed() {
			s.Passed++
		}
		if t.ErrorType != "" {
			s.Errored++
			errs[t.ErrorType]++
		}
		for i, d := range t.Phases {
			if d >= 0 {
				phases[i] = append(phases[i], d.Seconds())
			}
		}
		if t.Total > 0 {
			phases[len(PhaseNames)] = append(phases[len(PhaseNames)], t.Total.Seconds())
		}
		ts := tasks[t.Task]
		if ts == nil {
			ts = &TaskStats{Task: t.Task}
			tasks[t.Task] = ts
		}
		ts.Attempts++
		ts.MeanReward += t.Reward
		if t.Passed() {
			ts.Passed++
		}
		if t.ErrorType != "" {
			ts.Errors++
		}
	}
	if s.Done > 0 {
		s.MeanReward = sum / float64(s.Done)
		s.PassRate = float64(s.Passed) / float64(s.Done)
	}
	for name, n := range errs {
		s.Errors = append(s.Errors, Count{name, n})
	}
	slices.SortFunc(s.Errors, func(a, b Count) int { return cmp.Or(cmp.Compare(b.N, a.N), cmp.Compare(a.Name, b.Name)) })
	names := append(slices.Clone(PhaseNames), "total")
	for i, v := range phases {
		slices.Sort(v)
		s.Phases = append(s.Phases, PhaseStats{Name: names[i], Seconds: v, P50: Quantile(v, 0.50), P95: Quantile(v, 0.95)})
	}
	maxAttempts := 0
	for _, ts := range tasks {
		ts.MeanReward /= float64(ts.Attempts)
		maxAttempts = max(maxAttempts, ts.Attempts)
		s.Tasks = append(s.Tasks, *ts)
	}
	slices.SortFunc(s.Tasks, func(a, b TaskStats) int { return cmp.Compare(a.Task, b.Task) })
	for k := 1; k <= maxAttempts; k *= 2 {
		s.Ks = append(s.Ks, k)
	}
	for _, k := range s.Ks {
		total, n := 0.0, 0
		for i := range s.Tasks {
			ts := &s.Tasks[i]
			v := PassAtK(ts.Attempts, ts.Passed, k)
			ts.PassAtK = append(ts.PassAtK, v)
			if !math.IsNaN(v) {
				total += v
				n++
			}
		}
		if n > 0 {
			s.PassAtK = append(s.PassAtK, KV{Key: "pass@" + strconv.Itoa(k), Value: total / float64(n)})
		}
	}
	return s
}

// PassAtK is the unbiased estimate of the chance that at least one of k
// attempts passes, from n attempts with c passes (Chen et al. 2021):
// 1 - C(n-c, k) / C(n, k), computed as a product so that large n does not
// overflow. NaN when n < k.
func PassAtK(n, c, k int) float64 {
	if k <= 0 || n < k {
		return math.NaN()
	}
	if n-c < k {
		return 1
	}
	fail := 1.0
	for i := n - c + 1; i <= n; i++ {
		fail *= 1 - float64(k)/float64(i)
	}
	return 1 - fail
}

// Quantile of sorted values with the nearest-rank rule; 0 when empty.
func Quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
