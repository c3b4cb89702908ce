package view

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"time"

	"github.com/berth-sh/berth/results"
)

// funcs are the templates' helpers: formatting only, no data access.
var funcs = template.FuncMap{
	"secs":    secs,
	"dur":     dur,
	"num":     num,
	"pct":     pct,
	"delta":   delta,
	"bytes":   results.SizeString,
	"when":    when,
	"add":     func(a, b int) int { return a + b },
	"phase":   phaseAt,
	"logprob": logprob,
	"isNaN":   math.IsNaN,
}

func secs(s float64) string {
	switch {
	case s >= 100:
		return strconv.FormatFloat(s, 'f', 0, 64) + "s"
	case s >= 1:
		return strconv.FormatFloat(s, 'f', 2, 64) + "s"
	}
	return strconv.FormatFloat(s*1000, 'f', 1, 64) + "ms"
}

// dur formats a phase duration; a negative one did not run.
func dur(d time.Duration) string {
	if d < 0 {
		return "–"
	}
	if d >= time.Hour {
		return d.Round(time.Second).String()
	}
	return secs(d.Seconds())
}

func num(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func pct(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return strconv.FormatFloat(v*100, 'f', 1, 64) + "%"
}

func delta(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case v > 0:
		return "+" + strconv.FormatFloat(v, 'f', 3, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

func when(t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func phaseAt(t *results.Trial, i int) time.Duration {
	if i < len(t.Phases) {
		return t.Phases[i]
	}
	return -1
}

func logprob(v float64) string {
	if math.IsNaN(v) {
		return "none"
	}
	return fmt.Sprintf("%.4f (p=%.3f)", v, math.Exp(v))
}

func init() {
	funcs["shown"] = func(t *results.Text) string { return results.SizeString(int64(len(t.Data))) }
	funcs["outcomes"] = func() []string {
		return []string{"pass", "fail", "error", results.StateRunning, results.StateIncomplete, results.StateUnreadable}
	}
	funcs["pers"] = func() []int { return []int{25, 50, 100, 500} }
	funcs["phaseNames"] = func() []string { return results.PhaseNames }
	funcs["trialColumns"] = func() []column { return trialColumns }
	funcs["filesOf"] = func(l linker, ref results.Ref, trial string, es []results.Entry, more bool) files {
		return files{L: l, Ref: ref, Trial: trial, Entries: es, More: more}
	}
}

type column struct {
	Key, Label string
	Num        bool
}

var trialColumns = []column{
	{"task", "task", false}, {"attempt", "attempt", true}, {"trial", "trial", false},
	{"reward", "reward", true}, {"exit", "exit status", false}, {"error", "error type", false},
	{"environment_setup", "env setup", true}, {"agent_setup", "agent setup", true},
	{"agent_execution", "agent", true}, {"verifier", "verifier", true}, {"teardown", "teardown", true},
	{"total", "total", true},
}

type files struct {
	L       linker
	Ref     results.Ref
	Trial   string
	Entries []results.Entry
	More    bool
}
