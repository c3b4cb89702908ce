package tbench2_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth/builtin"
	"github.com/berth-sh/berth/internal/testing/benchstat"
	"github.com/berth-sh/berth/internal/testing/harbortest"
	"github.com/berth-sh/berth/internal/testing/testbin"
	"github.com/berth-sh/berth/openenv"
	"github.com/berth-sh/berth/openenv/tbench2"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/registry"
)

// BenchmarkHostedEpisodes runs episodes against the hosted tbench2 server
// over the local provider, opened as `berth openenv serve` opens it
// (through the registry, sandboxes started ahead): each episode is a new
// client session that resets to a task, runs 5 execs, evaluates and
// closes (the close returns once the sandbox is deleted). The task's own
// commands are trivial (an echo each; test.sh checks a file), so an
// episode's wall time is berth's time: the protocol, the sandbox's create
// and delete, and the exec and verifier round trips.
//
//	go test ./openenv/tbench2 -run '^$' -bench HostedEpisodes -benchtime 1x -timeout 30m
//
// BERTH_BENCH_EPISODES and BERTH_BENCH_CONCURRENCY override 200 and 16;
// BERTH_BENCH_POOL sets BERTH_POOL_SIZE (unset: the server's default, 2);
// BERTH_RUNTIME picks the OCI runtime as it does for berth.
func BenchmarkHostedEpisodes(b *testing.B) {
	episodes, conc := benchstat.EnvInt("BERTH_BENCH_EPISODES", 200), benchstat.EnvInt("BERTH_BENCH_CONCURRENCY", 16)
	hs, _ := hostedLocal(b, conc)
	for i := 0; i < b.N; i++ {
		var mu sync.Mutex
		var runs []timings
		work := make(chan struct{})
		var wg sync.WaitGroup
		start, cpu0 := time.Now(), benchstat.CPU()
		for range conc {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range work {
					t, err := episode(hs.URL)
					if err != nil {
						b.Error(err)
						return
					}
					mu.Lock()
					runs = append(runs, t)
					mu.Unlock()
				}
			}()
		}
		for range episodes {
			work <- struct{}{}
		}
		close(work)
		wg.Wait()
		wall, cpu := time.Since(start), benchstat.CPU()-cpu0
		if len(runs) != episodes {
			b.Fatalf("%d of %d episodes ran", len(runs), episodes)
		}
		col := func(f func(timings) time.Duration) []float64 {
			out := make([]float64, len(runs))
			for i, r := range runs {
				out[i] = float64(f(r)) / float64(time.Millisecond)
			}
			slices.Sort(out)
			return out
		}
		// The episode is reset, 5 execs and evaluate; close (the
		// sandbox's delete) is reported beside it.
		ep := col(func(t timings) time.Duration { return t.reset + t.execs + t.evaluate })
		total := col(func(t timings) time.Duration { return t.total })
		b.ReportMetric(wall.Seconds(), "s/run")
		b.ReportMetric(benchstat.Percentile(ep, 0.5), "ms-episode-p50")
		b.ReportMetric(benchstat.Percentile(ep, 0.95), "ms-episode-p95")
		b.ReportMetric(benchstat.Percentile(total, 0.5), "ms-with-close-p50")
		benchstat.ReportCPU(b, cpu, episodes, conc, "episode")
		p := func(f func(timings) time.Duration) string {
			c := col(f)
			return fmt.Sprintf("%.1f/%.1f", benchstat.Percentile(c, 0.5), benchstat.Percentile(c, 0.95))
		}
		b.Logf("%d episodes at %d sessions: %.1f s; p50/p95 ms: episode (reset, 5 execs, evaluate) %.1f/%.1f, with close %.1f/%.1f; reset %s, 5 execs %s, evaluate %s, close %s",
			episodes, conc, wall.Seconds(), benchstat.Percentile(ep, 0.5), benchstat.Percentile(ep, 0.95),
			benchstat.Percentile(total, 0.5), benchstat.Percentile(total, 0.95),
			p(func(t timings) time.Duration { return t.reset }), p(func(t timings) time.Duration { return t.execs }),
			p(func(t timings) time.Duration { return t.evaluate }), p(func(t timings) time.Duration { return t.close }))
	}
}

// hostedLocal starts the hosted server over local for a benchmark, with
// one episode run (the image seeded, the pool started), and returns it and
// its environment factory.
func hostedLocal(b *testing.B, conc int) (*httptest.Server, openenv.Factory) {
	testbin.NeedLocal(b)
	agent, err := testbin.Agent()
	if err != nil {
		b.Fatal(err)
	}
	state, err := os.MkdirTemp("", "berth-bench-") // short: agent sockets live under it
	if err != nil {
		b.Fatal(err)
	}
	vars := map[string]string{local.EnvStateDir: state, local.EnvAgentBinary: agent, registry.PoolSizeVar: "2"}
	if pool := os.Getenv("BERTH_BENCH_POOL"); pool != "" {
		vars[registry.PoolSizeVar] = pool
	}
	if rt := os.Getenv(local.EnvRuntime); rt != "" {
		vars[local.EnvRuntime] = rt
	}
	prov, err := builtin.Registry().Open(context.Background(), "local", registry.MapEnviron(vars, b.TempDir()), nil)
	if err != nil {
		b.Fatal(err)
	}
	tasks := b.TempDir()
	harbortest.Task(b, tasks, "answer", harbortest.TOMLImage(local.DefaultImage, "60", "60"), harbortest.SolveWrite, harbortest.TestAnswer, nil)
	factory, err := tbench2.NewFactory(tbench2.Options{Provider: prov, TasksDir: tasks})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := openenv.New(openenv.Options{Factory: factory, Info: tbench2.Info(), MaxConcurrentEnvs: conc})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	b.Cleanup(func() {
		srv.Close()
		hs.Close()
		prov.Close()
		d, _ := local.New(local.Options{StateDir: state, AgentBinary: agent})
		if ids, _ := d.Reap(context.Background()); len(ids) > 0 {
			b.Errorf("sandboxes left: %v", ids)
		}
		os.RemoveAll(state)
	})
	if _, err := episode(hs.URL); err != nil {
		b.Fatal(err)
	}
	return hs, factory
}

// BenchmarkProtocolShare is the protocol's share of an episode: episodes
// through the hosted server (a WebSocket session, JSON frames, validation)
// and the same episodes calling the environment directly, in turns, one at
// a time, so that load from elsewhere falls on both alike. The difference of
// the medians is what the OpenEnv layer adds to the sandbox work.
//
//	go test ./openenv/tbench2 -run '^$' -bench ProtocolShare -benchtime 1x
//
// BERTH_BENCH_EPISODES overrides 100 episodes per arm.
func BenchmarkProtocolShare(b *testing.B) {
	n := benchstat.EnvInt("BERTH_BENCH_EPISODES", 100)
	hs, factory := hostedLocal(b, 1)
	for i := 0; i < b.N; i++ {
		var ws, direct []float64
		for j := range 2 * n {
			var t timings
			var err error
			if j%2 == 0 {
				t, err = episode(hs.URL)
			} else {
				t, err = directEpisode(factory)
			}
			if err != nil {
				b.Fatal(err)
			}
			ms := float64(t.total) / float64(time.Millisecond)
			if j%2 == 0 {
				ws = append(ws, ms)
			} else {
				direct = append(direct, ms)
			}
		}
		slices.Sort(ws)
		slices.Sort(direct)
		share := benchstat.Percentile(ws, 0.5) - benchstat.Percentile(direct, 0.5)
		b.ReportMetric(benchstat.Percentile(ws, 0.5), "ms-protocol-p50")
		b.ReportMetric(benchstat.Percentile(direct, 0.5), "ms-direct-p50")
		b.ReportMetric(share, "ms-share-p50")
		b.Logf("%d episodes each: through the server p50 %.1f / p95 %.1f ms, direct p50 %.1f / p95 %.1f ms: the protocol adds %.1f ms per episode",
			n, benchstat.Percentile(ws, 0.5), benchstat.Percentile(ws, 0.95), benchstat.Percentile(direct, 0.5), benchstat.Percentile(direct, 0.95), share)
	}
}

// directEpisode is episode without the protocol: the Env's own calls.
func directEpisode(factory openenv.Factory) (timings, error) {
	var t timings
	ctx := context.Background()
	env, err := factory(ctx)
	if err != nil {
		return t, err
	}
	start := time.Now()
	if _, err := env.Reset(ctx, map[string]json.RawMessage{"task_id": json.RawMessage(`"answer"`)}); err != nil {
		return t, err
	}
	for _, a := range benchExecs {
		raw, _ := json.Marshal(a)
		if _, err := env.Step(ctx, raw); err != nil {
			return t, err
		}
	}
	a, _ := json.Marshal(tbench2.Action{ActionType: tbench2.ActionEvaluate, Block: true})
	obs, err := env.Step(ctx, a)
	if err != nil {
		return t, err
	}
	if obs.Reward == nil || *obs.Reward != 1 {
		return t, fmt.Errorf("evaluate: reward %v", obs.Reward)
	}
	if err := env.Close(ctx); err != nil {
		return t, err
	}
	t.total = time.Since(start)
	return t, nil
}

// benchExecs are an episode's 5 execs: trivial, the last one solving the
// task.
var benchExecs = []tbench2.Action{
	tbench2.Exec("echo step 0"), tbench2.Exec("echo step 1"), tbench2.Exec("echo step 2"), tbench2.Exec("echo step 3"),
	tbench2.Exec("echo 42 > /tmp/answer"),
}

type timings struct{ total, reset, execs, evaluate, close time.Duration }

// episode is one session: reset, 5 execs, evaluate, close.
func episode(url string) (timings, error) {
	var t timings
	ctx := context.Background()
	c, err := openenv.NewClient(url, openenv.ClientOptions{MessageTimeout: 5 * time.Minute})
	if err != nil {
		return t, err
	}
	defer c.Close()
	start := time.Now()
	if _, err := c.Reset(ctx, map[string]any{"task_id": "answer"}); err != nil {
		return t, err
	}
	t.reset = time.Since(start)
	mark := time.Now()
	for _, a := range benchExecs {
		if _, err := c.Step(ctx, a); err != nil {
			return t, err
		}
	}
	t.execs = time.Since(mark)
	mark = time.Now()
	r, err := c.Step(ctx, tbench2.Action{ActionType: tbench2.ActionEvaluate, Block: true})
	if err != nil {
		return t, err
	}
	if r.Reward == nil || *r.Reward != 1 {
		return t, fmt.Errorf("evaluate: reward %v", r.Reward)
	}
	t.evaluate = time.Since(mark)
	mark = time.Now()
	if err := c.Close(); err != nil {
		return t, err
	}
	t.close = time.Since(mark)
	t.total = time.Since(start)
	return t, nil
}
