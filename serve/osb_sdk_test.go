package serve

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/providers/daytona"
	"github.com/berth-sh/berth/providers/daytona/daytonatest"
	"github.com/berth-sh/berth/providers/e2b"
	"github.com/berth-sh/berth/providers/modal"
	"github.com/berth-sh/berth/providers/modal/modaltest"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/serve/internal/core"
	"github.com/berth-sh/berth/serve/internal/servetest"
)

// runOSB runs scenario.mjs in mode against e, creating image.
func (e *testEnv) runOSB(node, mode, image string, extra ...string) string {
	e.T.Helper()
	return e.RunScenario(node, servetest.OSBSDKDir, "OpenSandbox SDK", mode, append([]string{
		"OSB_DOMAIN=" + strings.TrimPrefix(e.URL, "http://"),
		"OSB_API_KEY=" + testKey,
		"OSB_IMAGE=" + image,
	}, extra...))
}

// osbBackends are the providers the OpenSandbox SDK scenario runs over,
// each with the image it names: local (berth serve's default); e2b, the
// e2b driver pointed at a second in-process berth serve over local; and
// Daytona and Modal through their drivers against their in-process servers.
var osbBackends = []struct {
	name   string
	newEnv func(t *testing.T) (*testEnv, string)
}{
	{"local", func(t *testing.T) (*testEnv, string) { return newLocalEnv(t, anyImage), bashImage }},
	{"e2b", func(t *testing.T) (*testEnv, string) {
		inner := newLocalEnv(t, nil)
		d, err := e2b.New(e2b.Options{APIKey: registry.Secret(testKey), APIURL: inner.URL, SandboxURL: inner.URL, Domain: "localhost"})
		if err != nil {
			t.Fatal(err)
		}
		p := sandbox.NewProvider("e2b", nestedLabels{d})
		t.Cleanup(func() { p.Close() })
		// The inner server's template "base" is the local bash image.
		return newEnvOver(t, p, e2bapi.DefaultTemplate, anyImage), e2bapi.DefaultTemplate
	}},
	{"daytona", func(t *testing.T) (*testEnv, string) {
		if why := daytonatest.Available(); why != "" {
			t.Skip(why)
		}
		srv, err := daytonatest.New(daytonatest.Options{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Close)
		d, err := daytona.New(daytona.Options{BaseURL: srv.URL(), APIKey: registry.Secret(srv.APIKey())})
		if err != nil {
			t.Fatal(err)
		}
		p := sandbox.NewProvider("daytona", d)
		t.Cleanup(func() { p.Close() })
		return newEnvOver(t, p, "busybox:1.36", anyImage), "busybox:1.36"
	}},
	{"modal", func(t *testing.T) (*testEnv, string) {
		bb, err := modaltest.Busybox()
		if err != nil {
			t.Skip(err)
		}
		srv := modaltest.New(t, modaltest.Options{Busybox: bb})
		// The Modal SDK reads its server from the process environment.
		srv.PointSDK(t)
		d, err := modal.New(modal.Options{TokenID: srv.TokenID(), TokenSecret: srv.TokenSecret(), Getenv: os.Getenv})
		if err != nil {
			t.Fatal(err)
		}
		p := sandbox.NewProvider("modal", d)
		t.Cleanup(func() { p.Close() })
		return newEnvOver(t, p, "debian:bookworm-slim", anyImage), "debian:bookworm-slim"
	}},
}

// nestedLabels stands between a berth serve and the e2b driver pointed at a
// second berth serve, which refuses the first one's own labels
// (berth.serve.*, reserved for the server that sets them): they travel
// under another prefix and are read back under theirs. E2B's cloud, the
// usual backend of the e2b driver, takes any metadata.
type nestedLabels struct{ driver.Provider }

const nestedPrefix = "outer."

func renameLabels(in map[string]string, from, to string) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		if rest, ok := strings.CutPrefix(k, from); ok {
			k = to + rest
		}
		out[k] = v
	}
	return out
}

func (n nestedLabels) Create(ctx context.Context, spec driver.Spec) (driver.Sandbox, error) {
	spec.Labels = renameLabels(spec.Labels, core.ServeLabelPrefix, nestedPrefix+core.ServeLabelPrefix)
	return n.Provider.Create(ctx, spec)
}

func (n nestedLabels) List(ctx context.Context, labels map[string]string) ([]driver.Info, error) {
	infos, err := n.Provider.List(ctx, renameLabels(labels, core.ServeLabelPrefix, nestedPrefix+core.ServeLabelPrefix))
	for i := range infos {
		infos[i].Labels = renameLabels(infos[i].Labels, nestedPrefix+core.ServeLabelPrefix, core.ServeLabelPrefix)
	}
	return infos, err
}

// TestOpenSandboxSDKScenario runs the Must-show scenario of issue 20 with
// the official OpenSandbox JS SDK against berth serve over each backend.
func TestOpenSandboxSDKScenario(t *testing.T) {
	node := servetest.NodeOSB(t)
	for _, be := range osbBackends {
		t.Run(be.name, func(t *testing.T) {
			e, image := be.newEnv(t)
			e.CheckScenario(e.runOSB(node, "scenario", image),
				"ok create with resource limits and metadata, then the endpoint lookup",
				"ok a foreground command with output and a non-zero exit code",
				"ok a background command with status and logs",
				"ok upload and download of a 5 MB file",
				"ok get, then delete",
			)
			eventually(t, "the provider has no sandbox left", func() bool {
				infos, err := e.P.List(context.Background(), nil)
				return err == nil && len(infos) == 0
			})
		})
	}
}

// BenchmarkOpenSandboxSDK times, over the local provider and in one server,
// the OpenSandbox JS SDK's create-to-first-command (Sandbox.create, which
// waits for execd's ping, then commands.run('true')) and its command round
// trip, side by side with the E2B JS SDK's create plus first command and
// commands.run('true'). BENCH_CREATES and BENCH_RUNS set the counts (20
// and 200). The numbers in BENCHMARKS.md come from here.
func BenchmarkOpenSandboxSDK(b *testing.B) {
	node := servetest.NodeOSB(b)
	servetest.NodeSDK(b)
	e := newLocalEnv(b, func(o *Options) { anyImage(o); o.MaxSandboxesPerKey = 100 })
	counts := []string{"BENCH_CREATES=" + os.Getenv("BENCH_CREATES"), "BENCH_RUNS=" + os.Getenv("BENCH_RUNS")}
	for b.Loop() {
		var osb struct {
			FirstP50 float64 `json:"first_command_p50_ms"`
			FirstP95 float64 `json:"first_command_p95_ms"`
			RunP50   float64 `json:"run_true_p50_ms"`
			RunP95   float64 `json:"run_true_p95_ms"`
		}
		benchJSON(b, e.runOSB(node, "bench", bashImage, counts...), &osb)
		var e2 struct {
			FirstP50 float64 `json:"first_command_p50_ms"`
			FirstP95 float64 `json:"first_command_p95_ms"`
			RunP50   float64 `json:"run_true_p50_ms"`
			RunP95   float64 `json:"run_true_p95_ms"`
		}
		benchJSON(b, e.RunSDK(node, "e2b", "bench-first", counts...), &e2)
		b.ReportMetric(osb.FirstP50, "osb-first-cmd-p50-ms")
		b.ReportMetric(osb.FirstP95, "osb-first-cmd-p95-ms")
		b.ReportMetric(osb.RunP50, "osb-run-p50-ms")
		b.ReportMetric(osb.RunP95, "osb-run-p95-ms")
		b.ReportMetric(e2.FirstP50, "e2b-first-cmd-p50-ms")
		b.ReportMetric(e2.FirstP95, "e2b-first-cmd-p95-ms")
		b.ReportMetric(e2.RunP50, "e2b-run-p50-ms")
		b.ReportMetric(e2.RunP95, "e2b-run-p95-ms")
	}
}

func benchJSON(b *testing.B, out string, v any) {
	b.Helper()
	line, _, _ := strings.Cut(out, "\n")
	if err := json.Unmarshal([]byte(line), v); err != nil {
		b.Fatalf("bench output %q: %v", out, err)
	}
}
