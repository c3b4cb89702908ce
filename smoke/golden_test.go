package smoke_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/builtin"
	"github.com/berth-sh/berth/internal/testbin"
	"github.com/berth-sh/berth/providers/daytona/daytonatest"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/providers/modal/modaltest"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/serve"
	"github.com/berth-sh/berth/serve/apikeys"
	"github.com/berth-sh/berth/smoke"
)

// TestGolden is the golden test: the golden episode on every registry
// entry, through each connector. For the harbor connector a provider whose
// credential is not available here is skipped with the command that
// provisions it; local needs no credential and always runs where berth can
// run it (root, runc).
//
// The openenv connector (hosted: berth's OpenEnv server outside the
// sandbox, one sandbox per session) runs on every entry offline: local for
// real, e2b through an in-process `berth serve` over local, daytona and
// modal against their in-process servers (daytonatest, modaltest). An entry
// with no offline server runs when its credential is available and is
// skipped otherwise. Each openenv case also checks that nop fails with
// reward 0 and that no sandbox is left.
func TestGolden(t *testing.T) {
	reg := builtin.Registry()
	osEnv := registry.OSEnviron()
	for _, e := range reg.Entries() {
		t.Run(e.Name, func(t *testing.T) {
			env := osEnv
			if ok, _ := e.Available(osEnv); !ok {
				t.Skipf("no %s credential here; provision it with: %s", e.Name, e.Credential.ProvisionHint)
			}
			if e.Name == "local" {
				env = localEnv(t, osEnv)
			}
			golden(t, reg, "harbor", e.Name, env, "golden", true)
		})
	}
	for _, e := range reg.Entries() {
		t.Run("openenv/"+e.Name, func(t *testing.T) {
			env := offline(t, e.Name, osEnv)
			if env == nil {
				if ok, _ := e.Available(osEnv); !ok {
					t.Skipf("no %s credential here; provision it with: %s", e.Name, e.Credential.ProvisionHint)
				}
				env = &osEnv
			}
			golden(t, reg, "openenv", e.Name, *env, "golden", true)
			golden(t, reg, "openenv", e.Name, *env, "nop", false)
		})
	}
}

func golden(t *testing.T, reg *registry.Registry, connector, backend string, env registry.Environ, agent string, pass bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rep, err := smoke.Run(ctx, smoke.Options{Connector: connector, Backend: backend, Agent: agent, Registry: reg, Env: env}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	rep.Print(&out)
	if rep.Pass != pass || rep.ExitStatus != smoke.Submitted || (!pass && rep.Reward != 0) {
		t.Fatalf("%s episode (%s) on %s:\n%s", agent, connector, backend, out.String())
	}
	t.Logf("\n%s", out.String())
}

// offline returns the environment that points entry name at an in-process
// server, started for the test; nil when there is none.
func offline(t *testing.T, name string, base registry.Environ) *registry.Environ {
	t.Helper()
	var env registry.Environ
	switch name {
	case "local":
		env = localEnv(t, base)
	case "e2b":
		env = serveEnv(t, base)
	case "daytona":
		if why := daytonatest.Available(); why != "" {
			t.Skip(why)
		}
		srv, err := daytonatest.New(daytonatest.Options{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			// Daytona deletes in the background: "destroying" is gone.
			for _, id := range srv.Live() {
				if st := srv.State(id); st != "destroying" {
					t.Errorf("daytona sandbox %s left %s", id, st)
				}
			}
			srv.Close()
		})
		env = registry.MapEnviron(map[string]string{"DAYTONA_API_KEY": srv.APIKey(), "DAYTONA_API_URL": srv.URL()}, t.TempDir())
	case "modal":
		bb, err := modaltest.Busybox()
		if err != nil {
			t.Skip(err)
		}
		srv := modaltest.New(t, modaltest.Options{Busybox: bb})
		home := t.TempDir()
		// The Modal SDK reads its server from the process environment.
		vars := map[string]string{
			"MODAL_SERVER_URL": srv.URL(), "MODAL_CONFIG_PATH": filepath.Join(home, "absent.toml"),
			"MODAL_PROFILE": "", "MODAL_SANDBOX_V2": "1",
		}
		for k, v := range vars {
			t.Setenv(k, v)
		}
		vars["MODAL_TOKEN_ID"], vars["MODAL_TOKEN_SECRET"] = srv.TokenID(), srv.TokenSecret()
		env = registry.MapEnviron(vars, home)
	default:
		return nil
	}
	return &env
}

// serveEnv runs an in-process `berth serve` over the local provider and
// points the e2b entry at it, by the URLs and key a user would set.
func serveEnv(t *testing.T, base registry.Environ) registry.Environ {
	t.Helper()
	lenv := localEnv(t, base)
	d, err := local.New(local.Options{StateDir: lenv.Get(local.EnvStateDir), AgentBinary: lenv.Get(local.EnvAgentBinary)})
	if err != nil {
		t.Fatal(err)
	}
	key := apikeys.Generate()
	keys, err := apikeys.New(key)
	if err != nil {
		t.Fatal(err)
	}
	backend := sandbox.NewProvider("local", d)
	srv, err := serve.New(serve.Options{Provider: backend, Keys: keys, BaseImage: local.DefaultImage, MaxSandboxesPerKey: 10})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		srv.Close()
		backend.Close()
	})
	u := serve.ClientURLs(hs.URL, "")
	return registry.MapEnviron(map[string]string{
		"E2B_API_KEY": key, "E2B_API_URL": u.APIURL, "E2B_SANDBOX_URL": u.SandboxURL, "E2B_DOMAIN": u.Domain,
	}, t.TempDir())
}

// localEnv points the local entry at a state dir and a static agent of the
// test's own, on top of the process environment.
func localEnv(t testing.TB, base registry.Environ) registry.Environ {
	t.Helper()
	testbin.NeedLocal(t)
	bin, err := testbin.Berth()
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	t.Cleanup(func() {
		// Nothing may outlive the test: reap what the episode left.
		p, err := local.New(local.Options{StateDir: state, AgentBinary: bin})
		if err == nil {
			ids, _ := p.Reap(context.Background())
			if len(ids) > 0 {
				t.Errorf("sandboxes left after the golden episode: %v", ids)
			}
			p.Close()
		}
	})
	over := map[string]string{local.EnvStateDir: state, local.EnvAgentBinary: bin}
	return registry.Environ{Home: base.Home, Lookup: func(k string) (string, bool) {
		if v, ok := over[k]; ok {
			return v, true
		}
		return base.Lookup(k)
	}}
}
