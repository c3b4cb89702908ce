package results

import (
	"cmp"
	"math"
	"slices"
)

// Comparison sets two jobs side by side, task by task.
type Comparison struct {
	A, B      *Job
	Rows      []TaskDelta // regressions, improvements (largest first), unchanged, one-sided
	Improved  int
	Regressed int
	Same      int
	OnlyA     int
	OnlyB     int
	// MeanDelta is B's mean reward minus A's over the tasks both ran.
	MeanDelta float64
}

// TaskDelta is one task in both jobs.
type TaskDelta struct {
	Task  string
	A, B  *TaskStats // nil where the job did not run the task
	Delta float64    // B's mean reward minus A's; NaN when one side is missing
}

// Compare pairs the tasks of a and b.
func Compare(a, b *Job) *Comparison {
	c := &Comparison{A: a, B: b}
	byTask := map[string]*TaskDelta{}
	for i := range a.Stats.Tasks {
		ts := &a.Stats.Tasks[i]
		byTask[ts.Task] = &TaskDelta{Task: ts.Task, A: ts}
	}
	for i := range b.Stats.Tasks {
		ts := &b.Stats.Tasks[i]
		d := byTask[ts.Task]
		if d == nil {
			d = &TaskDelta{Task: ts.Task}
			byTask[ts.Task] = d
		}
		d.B = ts
	}
	sum, n := 0.0, 0
	for _, d := range byTask {
		switch {
		case d.A == nil:
			d.Delta = math.NaN()
			c.OnlyB++
		case d.B == nil:
			d.Delta = math.NaN()
			c.OnlyA++
		default:
			d.Delta = d.B.MeanReward - d.A.MeanReward
			sum += d.Delta
			n++
			switch {
			case d.Delta > 1e-9:
				c.Improved++
			case d.Delta < -1e-9:
				c.Regressed++
			default:
				c.Same++
			}
		}
		c.Rows = append(c.Rows, *d)
	}
	if n > 0 {
		c.MeanDelta = sum / float64(n)
	}
	slices.SortFunc(c.Rows, func(x, y TaskDelta) int {
		return cmp.Or(cmp.Compare(rank(x.Delta), rank(y.Delta)), cmp.Compare(math.Abs(y.Delta), math.Abs(x.Delta)), cmp.Compare(x.Task, y.Task))
	})
	return c
}

// rank orders regressions, improvements, unchanged, one-sided.
func rank(d float64) int {
	switch {
	case math.IsNaN(d):
		return 3
	case d < -1e-9:
		return 0
	case d > 1e-9:
		return 1
	}
	return 2
}
