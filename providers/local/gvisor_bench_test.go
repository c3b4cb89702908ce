package local_test

import (
	"context"
	"testing"
	"time"

	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/sandbox"
)

// BenchmarkGVisor is what gVisor costs: berth's local provider under runsc
// side by side with the same provider under runc, both cold (no pool),
// arms alternating so that both see the same load. Reported as p50 in ms
// per arm: create to first exec, then exec round trips (execs/ per
// sandbox, in blocks), then teardown.
//
//	go test ./providers/local -run '^$' -bench GVisor -benchtime 40x
func BenchmarkGVisor(b *testing.B) {
	if why := runscMissing(b); why != "" {
		b.Skip(why)
	}
	ctx := context.Background()
	open := func(runtime string) *sandbox.Provider {
		o := options()
		o.Runtime = runtime
		d, err := local.New(o)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { d.Close() })
		p := sandbox.NewProvider("local", d)
		if err := p.PrepareImage(ctx, benchSpec); err != nil {
			b.Fatal(err)
		}
		return p
	}
	arms := []struct {
		name string
		p    *sandbox.Provider
	}{{"runc", open("runc")}, {"runsc", open("runsc")}}
	const execs = 20
	create := map[string][]time.Duration{}
	exec := map[string][]time.Duration{}
	teardown := map[string][]time.Duration{}
	for i := 0; i < b.N; i++ {
		for j := range arms {
			a := arms[(i+j)%2] // which goes first alternates
			time.Sleep(10 * time.Millisecond)
			t0 := time.Now()
			sb, err := a.p.Create(ctx, benchSpec)
			if err != nil {
				b.Fatal(err)
			}
			if res, err := sb.Run(ctx, trueCmd); err != nil || res.ExitCode != 0 {
				b.Fatal(res, err)
			}
			create[a.name] = append(create[a.name], time.Since(t0))
			for range execs {
				t0 := time.Now()
				if res, err := sb.Run(ctx, trueCmd); err != nil || res.ExitCode != 0 {
					b.Fatal(res, err)
				}
				exec[a.name] = append(exec[a.name], time.Since(t0))
			}
			t0 = time.Now()
			if err := sb.Delete(ctx); err != nil {
				b.Fatal(err)
			}
			teardown[a.name] = append(teardown[a.name], time.Since(t0))
			sb.Close()
		}
	}
	for _, a := range arms {
		m := map[string]float64{}
		putPercentiles(m, a.name+"-create-to-first-exec-", create[a.name])
		putPercentiles(m, a.name+"-exec-", exec[a.name])
		putPercentiles(m, a.name+"-teardown-", teardown[a.name])
		for k, v := range m {
			b.ReportMetric(v, k)
		}
	}
}
