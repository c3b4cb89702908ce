package smoke_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth/builtin"
	"github.com/berth-sh/berth/harbor/agent"
	"github.com/berth-sh/berth/harbor/task"
	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/hud/hudserve"
	"github.com/berth-sh/berth/internal/testing/benchstat"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/smoke"
)

// BenchmarkHUDEpisodes runs 200 golden episodes of the built-in task at 16
// concurrent sessions on the local provider three ways, in one run:
// through `berth hud serve` (hello, tasks.start, solution through the MCP
// tools over tunnels, tasks.grade, bye), through the OpenEnv connector
// (berth's hosted tbench2 server: reset, the solution through exec
// actions, evaluate, close) and straight on the sandbox API (create,
// prepare, the oracle agent, the verifier, delete: the same work with no
// protocol). The arms take turns in rounds (a quarter of the episodes
// each, the order rotated every round), so that load that comes and goes
// on the machine falls on all three alike. berth's overhead per episode
// for a connector is the difference of its latency distribution and the
// direct one, at p50 and p95.
//
//	go test ./smoke -run '^$' -bench BenchmarkHUDEpisodes -benchtime 1x -timeout 30m
//	BERTH_BENCH_EPISODES=200 BERTH_BENCH_CONCURRENCY=16 BERTH_BENCH_ROUNDS=4 (the defaults)
func BenchmarkHUDEpisodes(b *testing.B) {
	episodes := benchstat.EnvInt("BERTH_BENCH_EPISODES", 200)
	concurrency := benchstat.EnvInt("BERTH_BENCH_CONCURRENCY", 16)
	rounds := benchstat.EnvInt("BERTH_BENCH_ROUNDS", 4)
	env := localEnv(b, registry.OSEnviron())
	prov, err := builtin.Registry().Open(context.Background(), "local", env, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer prov.Close()
	tk, cleanup, err := smoke.BuiltinTask(local.DefaultImage)
	if err != nil {
		b.Fatal(err)
	}
	defer cleanup()
	srv, err := hudserve.New(hudserve.Options{Provider: prov, Tasks: []*task.Task{tk}, MaxSandboxes: concurrency})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	oeURL, oeStop, err := smoke.OpenEnvServer(tk, prov, concurrency)
	if err != nil {
		b.Fatal(err)
	}
	defer oeStop()
	if err := prov.PrepareImage(context.Background(), trial.TaskSpec(tk, trial.Overrides{})); err != nil {
		b.Fatal(err)
	}
	arms := []struct {
		name string
		run  func(context.Context) error
	}{
		{"hud", func(ctx context.Context) error {
			_, g, err := smoke.HUDEpisode(ctx, ln.Addr().String(), tk, "golden")
			if err == nil && g.Score != 1 {
				err = fmt.Errorf("hud: score %v", g.Score)
			}
			return err
		}},
		{"openenv", func(ctx context.Context) error {
			r, err := smoke.OpenEnvEpisode(ctx, oeURL, tk)
			if err == nil && r != 1 {
				err = fmt.Errorf("openenv: reward %v", r)
			}
			return err
		}},
		{"direct", func(ctx context.Context) error { return directEpisode(ctx, prov, tk) }},
	}
	for b.Loop() {
		lat := make([][]float64, len(arms))
		wall := make([]time.Duration, len(arms))
		for r := range rounds {
			n := episodes/rounds + btoi(r < episodes%rounds)
			for k := range arms {
				i := (k + r) % len(arms)
				t0 := time.Now()
				lat[i] = append(lat[i], runEpisodes(b, n, concurrency, arms[i].run)...)
				wall[i] += time.Since(t0)
			}
		}
		direct := lat[len(arms)-1]
		slices.Sort(direct)
		for i, a := range arms {
			slices.Sort(lat[i])
			if len(lat[i]) != episodes {
				b.Fatalf("%s: %d of %d episodes ran", a.name, len(lat[i]), episodes)
			}
			p50, p95 := benchstat.Percentile(lat[i], 0.50), benchstat.Percentile(lat[i], 0.95)
			b.ReportMetric(p50, a.name+"-p50-ms")
			b.ReportMetric(p95, a.name+"-p95-ms")
			msg := fmt.Sprintf("%-8s %d episodes at %d sessions in %.1f s: p50 %.0f ms, p95 %.0f ms", a.name, episodes, concurrency, wall[i].Seconds(), p50, p95)
			if i != len(arms)-1 {
				o50, o95 := p50-benchstat.Percentile(direct, 0.50), p95-benchstat.Percentile(direct, 0.95)
				b.ReportMetric(o50, a.name+"-overhead-p50-ms")
				b.ReportMetric(o95, a.name+"-overhead-p95-ms")
				msg += fmt.Sprintf("; overhead over direct p50 %.0f ms, p95 %.0f ms", o50, o95)
			}
			b.Log(msg)
		}
	}
}

func btoi(v bool) int {
	if v {
		return 1
	}
	return 0
}

// directEpisode is the episode's work with no protocol: what a Harbor
// trial does with the oracle agent.
func directEpisode(ctx context.Context, prov *sandbox.Provider, tk *task.Task) error {
	spec := trial.TaskSpec(tk, trial.Overrides{})
	spec.TTL = time.Hour
	sb, err := prov.Create(ctx, spec)
	if err != nil {
		return err
	}
	defer func() { _ = sb.Delete(context.Background()); sb.Close() }()
	if err := trial.Prepare(ctx, sb, tk); err != nil {
		return err
	}
	if err := (agent.Oracle{}).Run(ctx, agent.Env{Sandbox: sb, Task: tk}); err != nil {
		return err
	}
	_, err = trial.Verify(ctx, sb, tk, 0, nil)
	return err
}

// runEpisodes runs n episodes, concurrency at a time, and returns the
// latencies of those that succeeded, in milliseconds.
func runEpisodes(b *testing.B, n, concurrency int, run func(context.Context) error) []float64 {
	var mu sync.Mutex
	var out []float64
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				t0 := time.Now()
				err := run(ctx)
				d := time.Since(t0)
				cancel()
				if err != nil {
					b.Error(err)
					continue
				}
				mu.Lock()
				out = append(out, float64(d)/float64(time.Millisecond))
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return out
}
