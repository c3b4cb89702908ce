package e2bserve

import (
	"context"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/serve/internal/core"
)

// BenchmarkExec compares one exec of `true` (start to exit, output
// delivered) made directly and through the server, for both data planes:
//
//   - sandbox-api: the provider's Sandbox.Exec vs an envd client through
//     the server, which translates to Sandbox.Exec;
//
//   - proxy: an envd client on the agent's unix socket vs the same client
//     through the server, which forwards to that socket.
//
//   - local: the local provider (berth's default backend) called directly
//     (Sandbox.Exec, and an envd client on its agent's socket) vs an envd
//     client through the server, which forwards to that socket. Root and
//     runc, else skipped.
//
// The difference of each pair is what the serve layer adds per exec.
func BenchmarkExec(b *testing.B) {
	ctx := context.Background()
	execTrue := func(b *testing.B, exec func() (int, error)) {
		for b.Loop() {
			if code, err := exec(); code != 0 || err != nil {
				b.Fatalf("true: %d %v", code, err)
			}
		}
	}
	viaClient := func(c *envd.Client, args ...string) func() (int, error) {
		return func() (int, error) {
			p, err := c.Exec(ctx, sandbox.Command{Args: args})
			if err != nil {
				return -1, err
			}
			return p.Wait(ctx)
		}
	}

	b.Run("sandbox-api", func(b *testing.B) {
		e := newEnv(b, nil, nil)
		sb := e.Create(testKey, nil)
		infos, err := e.P.List(ctx, map[string]string{core.IDLabel: sb.SandboxID})
		if err != nil || len(infos) != 1 {
			b.Fatal(infos, err)
		}
		direct, err := e.P.Connect(ctx, infos[0].ID)
		if err != nil {
			b.Fatal(err)
		}
		defer direct.Close()
		b.Run("direct", func(b *testing.B) {
			execTrue(b, func() (int, error) {
				r, err := direct.Run(ctx, sandbox.Command{Args: []string{"true"}})
				return r.ExitCode, err
			})
		})
		b.Run("serve", func(b *testing.B) { execTrue(b, viaClient(e.EnvdClient(sb), "true")) })
	})

	b.Run("local", func(b *testing.B) {
		e := newLocalEnv(b, nil)
		sb := e.Create(testKey, nil)
		rec := e.C.Get(sb.SandboxID)
		direct, err := e.P.Connect(ctx, rec.Sandbox.ID())
		if err != nil {
			b.Fatal(err)
		}
		defer direct.Close()
		ep, err := direct.EnvdEndpoint(ctx)
		if err != nil {
			b.Fatal(err)
		}
		agent, err := envd.NewClient(ep.BaseURL, &http.Client{Transport: ep.Transport}, envd.WithAccessToken(ep.AccessToken), envd.WithKeepalive(0))
		if err != nil {
			b.Fatal(err)
		}
		defer agent.Close()
		b.Run("sandbox-api-direct", func(b *testing.B) {
			execTrue(b, func() (int, error) {
				r, err := direct.Run(ctx, sandbox.Command{Args: []string{"true"}})
				return r.ExitCode, err
			})
		})
		b.Run("agent-direct", func(b *testing.B) { execTrue(b, viaClient(agent, "true")) })
		viaServe := viaClient(e.EnvdClient(sb), "true")
		b.Run("serve", func(b *testing.B) { execTrue(b, viaServe) })
		// The pair in turns, so that load that comes and goes on the
		// machine falls on both alike: medians of each, and their
		// difference, which is what serve adds per exec.
		b.Run("paired", func(b *testing.B) {
			var dd, ds []time.Duration
			for b.Loop() {
				t0 := time.Now()
				r, err := direct.Run(ctx, sandbox.Command{Args: []string{"true"}})
				t1 := time.Now()
				code, serr := viaServe()
				t2 := time.Now()
				if err != nil || r.ExitCode != 0 || serr != nil || code != 0 {
					b.Fatalf("true: direct %d %v, serve %d %v", r.ExitCode, err, code, serr)
				}
				dd, ds = append(dd, t1.Sub(t0)), append(ds, t2.Sub(t1))
			}
			md, ms := median(dd), median(ds)
			b.ReportMetric(ms2(md), "direct-p50-ms")
			b.ReportMetric(ms2(ms), "serve-p50-ms")
			b.ReportMetric(ms2(ms-md), "added-p50-ms")
		})
	})

	b.Run("proxy", func(b *testing.B) {
		dir, err := os.MkdirTemp("", "berth-agent-")
		if err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(dir)
		ap := &agentProvider{t: b, dir: dir, agents: map[string]string{}}
		e := newEnv(b, nil, func(d driver.Provider) driver.Provider { ap.Provider = d; return ap })
		sb := e.Create(testKey, nil)
		rec := e.C.Get(sb.SandboxID)
		ep, err := rec.Sandbox.EnvdEndpoint(ctx)
		if err != nil {
			b.Fatal(err)
		}
		direct, err := envd.NewClient(ep.BaseURL, envd.UnixHTTPClient(ap.agents[rec.Sandbox.ID()]), envd.WithAccessToken(ep.AccessToken), envd.WithKeepalive(0))
		if err != nil {
			b.Fatal(err)
		}
		defer direct.Close()
		b.Run("direct", func(b *testing.B) { execTrue(b, viaClient(direct, "true")) })
		b.Run("serve", func(b *testing.B) { execTrue(b, viaClient(e.EnvdClient(sb), "true")) })
	})
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

func ms2(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
