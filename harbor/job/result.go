package job

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/results/layout"
)

// evalKey is Harbor's agent__model__dataset key; the built-in agents use no
// model ("none").
func evalKey(agent, model, dataset string) string {
	if model == "" {
		model = "none"
	}
	return agent + "__" + model + "__" + dataset
}

// aggregate rebuilds the evals from finished trial results.
func aggregate(key string, results []*trial.Result, attempts int) *layout.Eval {
	e := &layout.Eval{RewardStats: map[string]map[string][]string{}, ExceptionStats: map[string][]string{}}
	sum := 0.0
	perTask := map[string][]float64{}
	for _, r := range results {
		e.NTrials++
		if r.ExceptionInfo != nil {
			e.NErrors++
			e.ExceptionStats[r.ExceptionInfo.ExceptionType] = append(e.ExceptionStats[r.ExceptionInfo.ExceptionType], r.TrialName)
		}
		if r.VerifierResult != nil {
			for k, v := range r.VerifierResult.Rewards {
				if e.RewardStats[k] == nil {
					e.RewardStats[k] = map[string][]string{}
				}
				s := strconv.FormatFloat(v, 'f', -1, 64)
				e.RewardStats[k][s] = append(e.RewardStats[k][s], r.TrialName)
			}
		}
		// A missing reward counts as 0, as in Harbor.
		sum += r.Reward()
		perTask[r.TaskName] = append(perTask[r.TaskName], r.Reward())
	}
	mean := 0.0
	if e.NTrials > 0 {
		mean = sum / float64(e.NTrials)
	}
	e.Metrics = []map[string]float64{{"mean": mean}}
	if attempts > 1 {
		e.PassAtK = passAtK(perTask, attempts)
	}
	for _, v := range e.ExceptionStats {
		slices.Sort(v)
	}
	return e
}

// passAtK is the unbiased pass@k estimate averaged over tasks, for k = 1,
// 2, 4, ... up to the attempts per task (pass = reward 1.0).
func passAtK(perTask map[string][]float64, attempts int) map[string]float64 {
	out := map[string]float64{}
	for k := 1; k <= attempts; k *= 2 {
		total, n := 0.0, 0
		for _, rewards := range perTask {
			if len(rewards) < k {
				continue
			}
			c := 0
			for _, r := range rewards {
				if r >= 1 {
					c++
				}
			}
			total += 1 - comb(len(rewards)-c, k)/comb(len(rewards), k)
			n++
		}
		if n > 0 {
			out[fmt.Sprint(k)] = total / float64(n)
		}
	}
	return out
}

func comb(n, k int) float64 {
	if k > n {
		return 0
	}
	r := 1.0
	for i := 0; i < k; i++ {
		r = r * float64(n-i) / float64(i+1)
	}
	return r
}
