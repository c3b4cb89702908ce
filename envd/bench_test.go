package envd

import (
	"strconv"
	"testing"

	"github.com/berth-sh/berth/sandbox/driver"
)

// BenchmarkExecRoundTrip is one exec of `true` over the unix socket: start
// stream, fork+exec, start event, end event, trailer.
func BenchmarkExecRoundTrip(b *testing.B) {
	e := unixEnv(b, ServerOptions{})
	ctx := ctxT(b)
	cmd := driver.Command{Args: []string{"true"}}
	b.ReportAllocs()
	for b.Loop() {
		p, err := e.client.Exec(ctx, cmd)
		if err != nil {
			b.Fatal(err)
		}
		if code, err := p.Wait(ctx); err != nil || code != 0 {
			b.Fatalf("wait: %d %v", code, err)
		}
	}
}

// BenchmarkStat is one unary call over the unix socket, for the protocol's
// cost without a fork.
func BenchmarkStat(b *testing.B) {
	e := unixEnv(b, ServerOptions{})
	ctx := ctxT(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.client.Stat(ctx, "/"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExecParallel is execs of `true` from many clients at once,
// with the commands' oom_score_adj raised (as sandbox agents run) and
// without: the raise holds a lock across each fork, which this measures.
func BenchmarkExecParallel(b *testing.B) {
	for _, adj := range []int{0, MaxOOMScoreAdj} {
		b.Run("oom_score_adj="+strconv.Itoa(adj), func(b *testing.B) {
			e := unixEnv(b, ServerOptions{CommandOOMScoreAdj: adj})
			ctx := ctxT(b)
			cmd := driver.Command{Args: []string{"true"}}
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					p, err := e.client.Exec(ctx, cmd)
					if err != nil {
						b.Error(err)
						return
					}
					if code, err := p.Wait(ctx); err != nil || code != 0 {
						b.Errorf("wait: %d %v", code, err)
						return
					}
				}
			})
		})
	}
}
