package e2bserve

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/serve/internal/core"
	"github.com/berth-sh/berth/serve/internal/servetest"
)

// sdkRoutes are the control-plane routes each SDK must have used.
var sdkRoutes = map[string][]string{
	"e2b":      {e2bapi.RouteSandboxesV2, e2bapi.RouteConnectV2},
	"e2b-old":  {e2bapi.RouteSandboxes, e2bapi.RouteConnect},
	"e2b-2.10": {e2bapi.RouteSandboxes, e2bapi.RouteConnect},
}

// backends are the providers the SDK tests run the server over: the
// fake (chroot busybox sandboxes, given a /bin/bash by bashProvider; it
// runs wherever busybox does), the local provider, berth serve's
// default (runc containers on bashImage; root and runc, else skipped), and
// the fake behind a stateless server (every record in the sandboxes'
// labels; two replicas are providers/k8s TestServeReplicas).
var backends = []struct {
	name   string
	newEnv func(testing.TB, func(*core.Options)) *testEnv
}{
	{"fake", func(t testing.TB, mutate func(*core.Options)) *testEnv { return newEnv(t, mutate, nil) }},
	{"local", newLocalEnv},
	{"fake-stateless", newStatelessEnv},
}

// TestSDKScenario runs the Must-show scenario of issue 5 with each
// installed version of the official SDK (sdks) over each backend.
func TestSDKScenario(t *testing.T) {
	node := servetest.NodeSDK(t)
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			for _, sdk := range servetest.SDKs {
				t.Run(sdk, func(t *testing.T) {
					t.Parallel() // each has its own server; the scenario mostly waits
					sdkScenario(t, node, sdk, be.newEnv(t, nil))
				})
			}
		})
	}
}

func sdkScenario(t *testing.T, node, sdk string, e *testEnv) {
	out := e.RunSDK(node, sdk, "scenario")
	e.CheckScenario(out,
		"ok create with metadata and envs",
		"ok commands.run streams stdout and stderr to callbacks",
		"ok non-zero exit is CommandExitError",
		"ok cwd and env",
		"ok background command killed by pid",
		"ok files write, read, list, exists, makeDir, remove",
		"ok 5 MB round trip",
		"ok list filtered by metadata",
		"ok setTimeout shortens life; gone after",
		"ok connect from a second client",
		"ok kill; kill of an unknown id is false",
	)
	// Killed and timed-out sandboxes are gone from the provider too, not
	// only from the server's table.
	if infos, err := e.P.List(context.Background(), nil); err != nil || len(infos) != 0 {
		t.Fatalf("the provider still has sandboxes after the scenario: %+v %v", infos, err)
	}
	var routes = map[string]bool{}
	for _, s := range strings.Split(e.Metrics(), "\n") {
		if strings.HasPrefix(s, "berth_serve_requests_total{") {
			routes[s[strings.Index(s, "route=")+7:strings.LastIndex(s, `"}`)]] = true
		}
	}
	for _, want := range sdkRoutes[sdk] {
		if !routes[want] {
			t.Fatalf("%s did not use %s: %v", sdk, want, routes)
		}
	}
}

// checkScenario fails the test unless out has each of lines and PASS, and
// the server holds no sandbox after the scenario.
// BenchmarkSDK times Sandbox.create and commands.run('true') through the
// official JS SDK against the server, over each backend, and reports their
// medians and 95th percentiles: BENCH_CREATES creates (each killed after)
// as the SDK makes them by default (allowInternetAccess true: a public
// network where the provider has one), as many with allowInternetAccess
// false ("offline"), and BENCH_RUNS runs on one sandbox; 20 and 200 by
// default. One iteration is one SDK run of several seconds, so the default
// -benchtime makes one. The numbers in BENCHMARKS.md come from here.
func BenchmarkSDK(b *testing.B) {
	node := servetest.NodeSDK(b)
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			e := be.newEnv(b, func(o *core.Options) { o.MaxSandboxesPerKey = 100 })
			for b.Loop() {
				out := e.RunSDK(node, "e2b", "bench", "BENCH_CREATES="+os.Getenv("BENCH_CREATES"), "BENCH_RUNS="+os.Getenv("BENCH_RUNS"))
				var res struct {
					CreateP50  float64 `json:"create_p50_ms"`
					CreateP95  float64 `json:"create_p95_ms"`
					OfflineP50 float64 `json:"create_offline_p50_ms"`
					OfflineP95 float64 `json:"create_offline_p95_ms"`
					RunP50     float64 `json:"run_true_p50_ms"`
					RunP95     float64 `json:"run_true_p95_ms"`
				}
				line, _, _ := strings.Cut(out, "\n")
				if err := json.Unmarshal([]byte(line), &res); err != nil {
					b.Fatalf("bench output %q: %v", out, err)
				}
				b.ReportMetric(res.CreateP50, "create-p50-ms")
				b.ReportMetric(res.CreateP95, "create-p95-ms")
				b.ReportMetric(res.OfflineP50, "create-offline-p50-ms")
				b.ReportMetric(res.OfflineP95, "create-offline-p95-ms")
				b.ReportMetric(res.RunP50, "run-true-p50-ms")
				b.ReportMetric(res.RunP95, "run-true-p95-ms")
			}
		})
	}
}
