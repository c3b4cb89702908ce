package rollout_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth/builtin"
	"github.com/berth-sh/berth/harbor/agent/terminus"
	"github.com/berth-sh/berth/harbor/job"
	"github.com/berth-sh/berth/internal/testing/benchstat"
	"github.com/berth-sh/berth/internal/testing/testbin"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/results/layout"
	"github.com/berth-sh/berth/rollout"
	"github.com/berth-sh/berth/rollout/agents"
	"github.com/berth-sh/berth/rollout/rollouttest"
	"github.com/berth-sh/berth/session"
	"github.com/berth-sh/berth/session/engine"
	"github.com/berth-sh/berth/session/testengine"
)

// BenchmarkRolloutLocal runs 200 rollouts of the smoke task at -n 16 on
// the local provider, the test engine scripted as the golden policy behind
// an in-process session server, as `berth rollout --engine test:golden`
// runs them, and reports berth's own time: per episode, the time from the
// trial's start to its samples on disk less what the engine took and what
// the task's commands took inside the sandbox (they time themselves); per
// turn, the agent's turn (model call plus typing and waiting) less the
// engine's part and the commands'. "rollout-only" is the episode's time less
// the sandbox's lifecycle (environment setup, teardown, the verifier's
// exec): what a rollout adds to a Harbor trial (sessions, the agent's
// shell and turns, samples), apart from what BenchmarkJobLocal measures.
//
//	go test ./rollout -run '^$' -bench RolloutLocal -benchtime 1x -timeout 30m
//
// BERTH_BENCH_TRIALS and BERTH_BENCH_CONCURRENCY override 200 and 16.
func BenchmarkRolloutLocal(b *testing.B) {
	testbin.NeedLocal(b)
	c := rollouttest.Qwen3(b)
	trials, conc := benchstat.EnvInt("BERTH_BENCH_TRIALS", 200), benchstat.EnvInt("BERTH_BENCH_CONCURRENCY", 16)
	agent, err := testbin.Agent()
	if err != nil {
		b.Fatal(err)
	}
	tasks := b.TempDir()
	rollouttest.CopyTask(b, os.DirFS("../smoke/builtin-task"), filepath.Join(tasks, "smoke"), "berth.local/busybox:latest")
	// The smoke task's commands, timing themselves with bash's clock (the
	// local image's date has no %N); the agent's shell is bash there too.
	os.WriteFile(filepath.Join(tasks, "smoke/solution/solve.sh"), []byte("#!/bin/bash\ns=$EPOCHREALTIME\nmkdir -p /tmp/berth-smoke\necho berth > /tmp/berth-smoke/answer.txt\necho \"$s $EPOCHREALTIME\" > /logs/agent/solve-time\n"), 0o755)
	os.WriteFile(filepath.Join(tasks, "smoke/tests/test.sh"), []byte("#!/bin/bash\ns=$EPOCHREALTIME\n[ \"$(cat /tmp/berth-smoke/answer.txt)\" = berth ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\necho \"$s $EPOCHREALTIME\" > /logs/verifier/test-time\n"), 0o755)

	state, err := os.MkdirTemp("", "berth-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(state)
	env := registry.MapEnviron(map[string]string{local.EnvStateDir: state, local.EnvAgentBinary: agent}, b.TempDir())
	reg := builtin.Registry()

	te, err := testengine.New(c.Tok, rollouttest.Golden(b, tasks), testengine.Options{})
	if err != nil {
		b.Fatal(err)
	}
	et := &engineTimes{calls: map[string][]time.Duration{}}
	ets := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		te.ServeHTTP(w, r)
		et.add(r.Header.Get(engine.RoutingHeader), time.Since(start))
	}))
	defer ets.Close()
	eng, _ := engine.New(ets.URL, engine.SGLang, engine.Options{})
	srv, err := session.New(session.Options{Engine: eng, Codec: c})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	defer srv.Close()

	for i := 0; i < b.N; i++ {
		jobs := b.TempDir()
		start, cpu0 := time.Now(), benchstat.CPU()
		res, err := rollout.Run(context.Background(), rollout.Config{
			Job:    job.Config{JobConfig: layout.JobConfig{JobName: "bench", JobsDir: jobs, TasksPath: tasks, Backend: "local", NConcurrent: conc, NAttempts: trials}},
			Agent:  agents.Terminus(terminus.Options{Model: "policy"}),
			Strict: true,
		}, rollout.Options{Registry: reg, Env: env, Sessions: &session.Client{BaseURL: ts.URL}})
		wall, cpu := time.Since(start), benchstat.CPU()-cpu0
		if err != nil {
			b.Fatal(err)
		}
		if res.Rollout.Samples != trials || res.Summary.Passed != trials {
			b.Fatalf("%d samples, %d passed", res.Rollout.Samples, res.Summary.Passed)
		}
		ep, turn, own := et.overheads(b, filepath.Join(jobs, "bench"))
		b.ReportMetric(wall.Seconds(), "s/rollout")
		b.ReportMetric(benchstat.Percentile(ep, 0.5), "ms-episode-p50")
		b.ReportMetric(benchstat.Percentile(ep, 0.95), "ms-episode-p95")
		b.ReportMetric(benchstat.Percentile(turn, 0.5), "ms-turn-p50")
		b.ReportMetric(benchstat.Percentile(turn, 0.95), "ms-turn-p95")
		b.ReportMetric(benchstat.Percentile(own, 0.5), "ms-rollout-only-p50")
		benchstat.ReportCPU(b, cpu, trials, conc, "episode")
		b.Logf("%d rollouts at -n %d: %.1f s; berth per episode p50 %.1f ms p95 %.1f ms (rollout-only p50 %.1f ms p95 %.1f ms); per turn p50 %.2f ms p95 %.2f ms (%d turns); phases %+v",
			trials, conc, wall.Seconds(), benchstat.Percentile(ep, 0.5), benchstat.Percentile(ep, 0.95), benchstat.Percentile(own, 0.5), benchstat.Percentile(own, 0.95), benchstat.Percentile(turn, 0.5), benchstat.Percentile(turn, 0.95), len(turn), res.Summary.Phases)
	}
}

// engineTimes are the test engine's own durations per session, in call
// order.
type engineTimes struct {
	mu    sync.Mutex
	calls map[string][]time.Duration
}

func (e *engineTimes) add(key string, d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls[key] = append(e.calls[key], d)
}

// overheads returns berth's milliseconds per episode, per turn, and per
// episode less the sandbox's lifecycle.
func (e *engineTimes) overheads(b *testing.B, jobDir string) (episodes, turns, own []float64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, d := range rollouttest.TrialDirs(b, jobDir) {
		r := rollouttest.TrialResult(b, d)
		ss := rollouttest.ReadSamples(b, d)
		fi, err := os.Stat(filepath.Join(d, "samples.jsonl"))
		if err != nil || len(ss) != 1 {
			b.Fatalf("%s: %v", d, err)
		}
		calls := e.calls[ss[0].SessionID]
		var engine time.Duration
		for _, c := range calls {
			engine += c
		}
		solve, test := cmdTime(filepath.Join(d, "agent", "solve-time")), cmdTime(filepath.Join(d, "verifier", "test-time"))
		if solve == 0 || test == 0 {
			b.Fatalf("%s: the commands did not time themselves", d)
		}
		ep := fi.ModTime().Sub(r.StartedAt) - engine - solve - test
		episodes = append(episodes, ms(ep))
		own = append(own, ms(ep-r.EnvironmentSetup.Duration()-r.Teardown.Duration()-(r.Verifier.Duration()-test)))
		for i, t := range r.AgentResult.Metadata["turns"].([]any) {
			m := t.(map[string]any)
			d := time.Duration((m["generation_seconds"].(float64) + m["tool_seconds"].(float64)) * float64(time.Second))
			if i < len(calls) {
				d -= calls[i]
			}
			if i == 0 {
				d -= solve
			}
			turns = append(turns, ms(d))
		}
	}
	slices.Sort(episodes)
	slices.Sort(turns)
	slices.Sort(own)
	return episodes, turns, own
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// cmdTime reads "start end" in seconds ($EPOCHREALTIME) that a command
// printed.
func cmdTime(p string) time.Duration {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0
	}
	var s, e float64
	if _, err := fmt.Sscan(string(b), &s, &e); err != nil || e < s {
		return 0
	}
	return time.Duration((e - s) * float64(time.Second))
}
