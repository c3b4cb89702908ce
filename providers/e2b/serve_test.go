package e2b_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/builtin"
	"github.com/berth-sh/berth/internal/apikeys"
	"github.com/berth-sh/berth/internal/testing/harbortest"
	"github.com/berth-sh/berth/internal/testing/testbin"
	"github.com/berth-sh/berth/providers/e2b"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/sandboxtest"
	"github.com/berth-sh/berth/serve"
	"github.com/berth-sh/berth/smoke"
)

// TestSuiteAgainstServe runs the conformance suite through the driver
// against an in-process `berth serve`, whose backend is the test
// registry's fake provider (chrooted busybox sandboxes).
func TestSuiteAgainstServe(t *testing.T) {
	r := harbortest.Registry(t, nil) // skips without root or busybox
	backend, err := r.Open(t.Context(), "fake", harbortest.Env(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	runSuiteThroughServe(t, backend, "host")
}

// TestSuiteAgainstServeLocal is the same over the local provider, berth
// serve's default backend: the data plane is proxied to each sandbox's
// own agent.
func TestSuiteAgainstServeLocal(t *testing.T) {
	testbin.NeedLocal(t)
	agent, err := testbin.Agent()
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	d, err := local.New(local.Options{StateDir: state, AgentBinary: agent})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ids, _ := d.Reap(context.Background())
		if len(ids) > 0 {
			t.Errorf("sandboxes left: %v", ids)
		}
	})
	runSuiteThroughServe(t, sandbox.NewProvider("local", d), "berth.local/busybox:latest")
}

func runSuiteThroughServe(t *testing.T, backend *sandbox.Provider, baseImage string) {
	t.Helper()
	urls, key := startServe(t, backend, baseImage)
	sandboxtest.Run(t, sandboxtest.Harness{
		Open: func(t *testing.T) *sandbox.Provider {
			d, err := e2b.New(e2b.Options{
				APIKey:     registry.Secret(key),
				APIURL:     urls.APIURL,
				SandboxURL: urls.SandboxURL,
				Domain:     urls.Domain,
			})
			if err != nil {
				t.Fatal(err)
			}
			return sandbox.NewProvider("e2b", d)
		},
		Spec: func() sandbox.Spec { return sandbox.Spec{Image: "base", TTL: 10 * time.Minute} },
	})
}

// startServe runs an in-process berth serve over backend and returns what
// a client sets (E2B_API_URL, E2B_SANDBOX_URL, E2B_DOMAIN) and its key.
func startServe(t *testing.T, backend *sandbox.Provider, baseImage string) (serve.URLs, string) {
	t.Helper()
	key := apikeys.Generate()
	keys, err := apikeys.New(key)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := serve.New(serve.Options{
		Provider:           backend,
		Keys:               keys,
		BaseImage:          baseImage,
		MaxSandboxesPerKey: 100,
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		srv.Close()
		backend.Close()
	})
	return serve.ClientURLs(hs.URL, ""), key
}

// TestGoldenThroughServe: the golden episode on the agentenv entry (the
// e2b driver, as a self-hosted E2B server is used) pointed at berth serve
// over the local provider, by the two URLs a user would set.
func TestGoldenThroughServe(t *testing.T) {
	testbin.NeedLocal(t)
	agent, err := testbin.Agent()
	if err != nil {
		t.Fatal(err)
	}
	d, err := local.New(local.Options{StateDir: t.TempDir(), AgentBinary: agent})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Reap(context.Background()) })
	// "base" is the e2b entry's default image; serve maps it to local's
	// seeded image, which has bash.
	urls, key := startServe(t, sandbox.NewProvider("local", d), "berth.local/busybox:latest")
	env := registry.MapEnviron(map[string]string{
		"E2B_API_KEY": key, "E2B_API_URL": urls.APIURL, "E2B_SANDBOX_URL": urls.SandboxURL, "E2B_DOMAIN": urls.Domain,
	}, t.TempDir())
	for _, c := range []struct {
		agent string
		pass  bool
	}{{"golden", true}, {"nop", false}} {
		rep, err := smoke.Run(t.Context(), smoke.Options{Connector: "harbor", Backend: "agentenv", Agent: c.agent, Registry: builtin.Registry(), Env: env}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if rep.ResultsDir != "" {
			os.RemoveAll(filepath.Dir(rep.ResultsDir))
		}
		if rep.Pass != c.pass || rep.ExitStatus != smoke.Submitted {
			var out strings.Builder
			rep.Print(&out)
			t.Fatalf("agent %s through berth serve:\n%s", c.agent, out.String())
		}
	}
}
