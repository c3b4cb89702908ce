package local_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/sandbox"
)

// BenchmarkCreateToFirstExecPool times Create plus the first exec of
// `true` side by side, cold (no pool) and pooled, alternating in one loop
// so that both see the same host load. The pool is refilled between
// creates with the timer stopped: a runner that creates less often than a
// refill takes (~40 ms here).
// Run: go test ./providers/local -run '^$' -bench CreateToFirstExecPool -benchtime 100x
func BenchmarkCreateToFirstExecPool(b *testing.B) {
	coldAndPooled(b, map[string]sandbox.Spec{"": benchSpec})
}

// coldAndPooled times createFirstExec of each Spec (by metric prefix) on a
// provider without a pool and on one with a ready sandbox of each,
// alternating.
func coldAndPooled(b *testing.B, specs map[string]sandbox.Spec) {
	cold := sandbox.NewProvider("local", openPooled(b, local.Pool{}))
	pd := openPooled(b, local.Pool{Size: 1})
	pooled := sandbox.NewProvider("local", pd)
	ctx := context.Background()
	if err := cold.PrepareImage(ctx, benchSpec); err != nil {
		b.Fatal(err)
	}
	names := slices.Sorted(maps.Keys(specs))
	for _, n := range names {
		warm(b, pd, specs[n])
	}
	dc, dp := map[string][]time.Duration{}, map[string][]time.Duration{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if _, err := local.PoolReady(ctx, pd); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for _, n := range names {
			dc[n] = append(dc[n], createFirstExecSpec(b, cold, specs[n]))
			dp[n] = append(dp[n], createFirstExecSpec(b, pooled, specs[n]))
		}
	}
	b.StopTimer()
	if n := local.PoolHanded(pd); n != len(specs)*b.N {
		b.Fatalf("%d of %d pooled creates took a ready sandbox", n, len(specs)*b.N)
	}
	for _, n := range names {
		reportPercentiles(b, "cold-"+n, dc[n])
		reportPercentiles(b, "pooled-"+n, dp[n])
	}
}

// BenchmarkCreateToFirstExecPoolBackToBack creates with a pool as fast as
// it can: the creates that find the pool empty start cold, and the refill
// competes with them for the CPUs.
func BenchmarkCreateToFirstExecPoolBackToBack(b *testing.B) {
	pd := openPooled(b, local.Pool{Size: 2})
	p := sandbox.NewProvider("local", pd)
	warm(b, pd, benchSpec)
	var ds []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ds = append(ds, createFirstExec(b, p))
	}
	b.StopTimer()
	reportPercentiles(b, "", ds)
	b.ReportMetric(float64(local.PoolHanded(pd))/float64(b.N), "pooled/op")
}

// BenchmarkCreateToFirstExecDisk is BenchmarkCreateToFirstExecPool with
// and without a disk limit (StorageMB 4096, serve's default), the four
// alternating: cold the disk is made in Create (a sparse file, mkfs.ext4,
// a loop mount), pooled it was made when the ready sandbox started.
// Run: go test ./providers/local -run '^$' -bench CreateToFirstExecDisk -benchtime 50x
func BenchmarkCreateToFirstExecDisk(b *testing.B) {
	disk := benchSpec
	disk.Resources.StorageMB = 4096
	coldAndPooled(b, map[string]sandbox.Spec{"": benchSpec, "disk-": disk})
}

// createFirstExec times one Create and its first exec; the Delete after it
// is not timed.
func createFirstExec(b *testing.B, p *sandbox.Provider) time.Duration {
	return createFirstExecSpec(b, p, benchSpec)
}

func createFirstExecSpec(b *testing.B, p *sandbox.Provider, spec sandbox.Spec) time.Duration {
	ctx := context.Background()
	t0 := time.Now()
	sb, err := p.Create(ctx, spec)
	if err != nil {
		b.Fatal(err)
	}
	if res, err := sb.Run(ctx, trueCmd); err != nil || res.ExitCode != 0 {
		b.Fatal(res, err)
	}
	d := time.Since(t0)
	b.StopTimer()
	if err := sb.Delete(ctx); err != nil {
		b.Fatal(err)
	}
	sb.Close()
	b.StartTimer()
	return d
}

// reportPercentiles reports the median and the 95th percentile in ms.
func reportPercentiles(b *testing.B, prefix string, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	ms := func(x time.Duration) float64 { return float64(x.Microseconds()) / 1000 }
	b.ReportMetric(ms(d[len(d)/2]), prefix+"p50-ms")
	b.ReportMetric(ms(d[(len(d)*95)/100]), prefix+"p95-ms")
}
