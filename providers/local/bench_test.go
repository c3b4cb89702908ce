package local_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/sandbox"
)

// Benchmarks report the median in ms as "p50-ms" besides Go's mean ns/op.
// Run: go test ./providers/local -run '^$' -bench . -benchtime 50x

func reportP50(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, "p50-ms")
}

func benchProvider(b *testing.B) *sandbox.Provider {
	b.Helper()
	p := sandbox.NewProvider("local", newDriver(b))
	// Seed and unpack the image outside the timings.
	if err := p.PrepareImage(context.Background(), benchSpec); err != nil {
		b.Fatal(err)
	}
	return p
}

// benchSandbox creates a sandbox of benchSpec that lives until b ends.
func benchSandbox(b *testing.B, p *sandbox.Provider) *sandbox.Sandbox {
	b.Helper()
	sb, err := p.Create(context.Background(), benchSpec)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sb.Delete(context.Background()); sb.Close() })
	return sb
}

var benchSpec = sandbox.Spec{Image: local.DefaultImage, TTL: 10 * time.Minute}

var trueCmd = sandbox.Command{Args: []string{"true"}}

// BenchmarkCreateToFirstExec times Create plus the first exec of `true`
// (start, exit, status back): what a runner waits for before an agent runs.
func BenchmarkCreateToFirstExec(b *testing.B) {
	p := benchProvider(b)
	ctx := context.Background()
	var ds []time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		sb, err := p.Create(ctx, benchSpec)
		if err != nil {
			b.Fatal(err)
		}
		if res, err := sb.Run(ctx, trueCmd); err != nil || res.ExitCode != 0 {
			b.Fatal(res, err)
		}
		ds = append(ds, time.Since(t0))
		b.StopTimer()
		if err := sb.Delete(ctx); err != nil {
			b.Fatal(err)
		}
		sb.Close()
		b.StartTimer()
	}
	reportP50(b, ds)
}

// BenchmarkExecRoundTrip times one exec of `true` in a running sandbox.
func BenchmarkExecRoundTrip(b *testing.B) {
	p := benchProvider(b)
	ctx := context.Background()
	sb := benchSandbox(b, p)
	if _, err := sb.Run(ctx, trueCmd); err != nil { // warm the connection
		b.Fatal(err)
	}
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if res, err := sb.Run(ctx, trueCmd); err != nil || res.ExitCode != 0 {
			b.Fatal(res, err)
		}
		ds = append(ds, time.Since(t0))
	}
	reportP50(b, ds)
}

// BenchmarkTeardown times Delete: kill, wait, runtime delete, unmount,
// cgroups, directory.
func BenchmarkTeardown(b *testing.B) {
	p := benchProvider(b)
	ctx := context.Background()
	var ds []time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		sb, err := p.Create(ctx, benchSpec)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		if err := sb.Delete(ctx); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(t0))
		sb.Close()
	}
	reportP50(b, ds)
}
