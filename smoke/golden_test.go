package smoke_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/builtin"
	"github.com/berth-sh/berth/internal/testing/nettest"
	"github.com/berth-sh/berth/internal/testing/testbin"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/registry"
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
			env := offlineEnv(t, e, osEnv)
			golden(t, reg, "openenv", e.Name, env, "golden", true)
			golden(t, reg, "openenv", e.Name, env, "nop", false)
		})
	}
	for _, e := range reg.Entries() {
		t.Run("openenv-sandbox/"+e.Name, func(t *testing.T) {
			o := inSandbox(t, e, osEnv)
			o.Agent = "golden"
			goldenWith(t, o, true)
			o.Agent = "nop"
			goldenWith(t, o, false)
		})
	}
}

// inSandbox is the smoke run of the openenv connector with its server in
// the task's sandbox on entry e, offline where offlineEnv has a server:
// the static berth-agent of the test is uploaded, and the fakes whose
// sandboxes share this host's network (daytonatest, modaltest) get a free
// port in place of 8000.
func inSandbox(t *testing.T, e registry.Entry, osEnv registry.Environ) smoke.Options {
	t.Helper()
	agent, err := testbin.Agent()
	if err != nil {
		t.Fatal(err)
	}
	o := smoke.Options{Connector: "openenv", Layout: smoke.LayoutSandbox, Backend: e.Name, Registry: builtin.Registry(), AgentBinary: agent}
	switch e.Name {
	case "modal":
		srv, env := modalServer(t)
		o.Env, o.Port = env, nettest.FreePort(t)
		o.EndpointClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: srv.TunnelRoots()}}}
	case "daytona":
		o.Env, o.Port = daytonaInProcess(t), nettest.FreePort(t)
	default:
		o.Env = offlineEnv(t, e, osEnv)
	}
	return o
}

func golden(t *testing.T, reg *registry.Registry, connector, backend string, env registry.Environ, agent string, pass bool) {
	t.Helper()
	goldenWith(t, smoke.Options{Connector: connector, Backend: backend, Agent: agent, Registry: reg, Env: env}, pass)
}

func goldenWith(t *testing.T, o smoke.Options, pass bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rep, err := smoke.Run(ctx, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	rep.Print(&out)
	if rep.Pass != pass || rep.ExitStatus != smoke.Submitted || (!pass && rep.Reward != 0) {
		t.Fatalf("%s episode (%s) on %s:\n%s", o.Agent, rep.Connector, o.Backend, out.String())
	}
	t.Logf("\n%s", out.String())
}

// offlineEnv is the environment that points entry e at an in-process
// server started for the test (local itself, e2b through berth serve over
// local, daytonatest, modaltest); an entry with none runs on its real
// service where its credential is available and is skipped otherwise.
func offlineEnv(t *testing.T, e registry.Entry, osEnv registry.Environ) registry.Environ {
	t.Helper()
	switch e.Name {
	case "local":
		return localEnv(t, osEnv)
	case "e2b":
		return e2bThroughServe(t)
	case "daytona":
		return daytonaInProcess(t)
	case "modal":
		return modalInProcess(t)
	}
	if ok, _ := e.Available(osEnv); !ok {
		t.Skipf("no %s credential here; provision it with: %s", e.Name, e.Credential.ProvisionHint)
	}
	return osEnv
}

// localEnv points the local entry at a state dir and a static agent of the
// test's own, on top of the process environment.
func localEnv(t testing.TB, base registry.Environ) registry.Environ {
	t.Helper()
	testbin.NeedLocal(t)
	agent, err := testbin.Agent()
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	t.Cleanup(func() {
		// Nothing may outlive the test: reap what the episode left.
		p, err := local.New(local.Options{StateDir: state, AgentBinary: agent})
		if err == nil {
			ids, _ := p.Reap(context.Background())
			if len(ids) > 0 {
				t.Errorf("sandboxes left after the golden episode: %v", ids)
			}
			p.Close()
		}
	})
	over := map[string]string{local.EnvStateDir: state, local.EnvAgentBinary: agent}
	return registry.Environ{Home: base.Home, Lookup: func(k string) (string, bool) {
		if v, ok := over[k]; ok {
			return v, true
		}
		return base.Lookup(k)
	}}
}
