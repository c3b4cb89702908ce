package smoke_test

import (
	"context"
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
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/smoke"
)

// BenchmarkHUDEpisodes runs 200 golden episodes of the built-in task at 16
// concurrent sessions on the local provider, twice: through `berth hud
// serve` (hello, tasks.start, solution through the MCP tools over
// tunnels, tasks.grade, bye) and straight on the sandbox API (create,
// prepare, the oracle agent, the verifier, delete: the same work with no
// protocol). berth's overhead per episode is the difference of the two
// latency distributions, reported at p50 and p95.
//
//	go test ./smoke -run '^$' -bench BenchmarkHUDEpisodes -benchtime 1x
func BenchmarkHUDEpisodes(b *testing.B) {
	const episodes, concurrency = 200, 16
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
	if err := prov.PrepareImage(context.Background(), trial.TaskSpec(tk, trial.Overrides{})); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		viaHUD := runEpisodes(b, episodes, concurrency, func(ctx context.Context) error {
			_, g, err := smoke.HUDEpisode(ctx, ln.Addr().String(), tk, "golden")
			if err == nil && g.Score != 1 {
				b.Errorf("score %v", g.Score)
			}
			return err
		})
		direct := runEpisodes(b, episodes, concurrency, func(ctx context.Context) error {
			return directEpisode(ctx, prov, tk)
		})
		for _, q := range []struct {
			name string
			p    float64
		}{{"p50", 0.50}, {"p95", 0.95}} {
			h, d := quantile(viaHUD, q.p), quantile(direct, q.p)
			b.ReportMetric(ms(h), "hud-"+q.name+"-ms")
			b.ReportMetric(ms(d), "direct-"+q.name+"-ms")
			b.ReportMetric(ms(h-d), "overhead-"+q.name+"-ms")
		}
	}
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

func runEpisodes(b *testing.B, n, concurrency int, run func(context.Context) error) []time.Duration {
	var mu sync.Mutex
	var out []time.Duration
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
				out = append(out, d)
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	slices.Sort(out)
	return out
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
