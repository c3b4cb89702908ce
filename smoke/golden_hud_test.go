package smoke_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/berth-sh/berth/builtin"
	"github.com/berth-sh/berth/internal/apikeys"
	"github.com/berth-sh/berth/internal/testing/localtest"
	"github.com/berth-sh/berth/providers/daytona/daytonatest"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/providers/modal/modaltest"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/serve"
)

// TestGoldenHUD is the golden test's hud case on every registry entry:
// `berth smoke --connector hud` with the golden agent passes and with nop
// scores 0. local runs for real; e2b runs through an in-process berth serve
// over local; daytona and modal run against their in-process servers; an
// entry added later runs where its credential is available.
func TestGoldenHUD(t *testing.T) {
	reg := builtin.Registry()
	osEnv := registry.OSEnviron()
	for _, e := range reg.Entries() {
		t.Run(e.Name, func(t *testing.T) {
			env := offlineEnv(t, e, osEnv)
			golden(t, reg, "hud", e.Name, env, "golden", true)
			golden(t, reg, "hud", e.Name, env, "nop", false)
		})
	}
}

// e2bThroughServe is the e2b entry's environment pointed at an in-process
// berth serve over the local provider.
func e2bThroughServe(t *testing.T) registry.Environ {
	t.Helper()
	d := localtest.Open(t)
	backend := sandbox.NewProvider("local", d)
	key := apikeys.Generate()
	keys, err := apikeys.New(key)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := serve.New(serve.Options{Provider: backend, Keys: keys, BaseImage: local.DefaultImage, MaxSandboxesPerKey: 10})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		srv.Close()
		if ids, _ := d.Reap(context.Background()); len(ids) > 0 {
			t.Errorf("sandboxes left: %v", ids)
		}
		backend.Close()
	})
	u := serve.ClientURLs(hs.URL, "")
	return registry.MapEnviron(map[string]string{
		"E2B_API_KEY": key, "E2B_API_URL": u.APIURL, "E2B_SANDBOX_URL": u.SandboxURL, "E2B_DOMAIN": u.Domain,
	}, t.TempDir())
}

// daytonaInProcess is the daytona entry's environment pointed at the
// in-process Daytona.
func daytonaInProcess(t *testing.T) registry.Environ {
	t.Helper()
	if why := daytonatest.Available(); why != "" {
		t.Skip(why)
	}
	srv, err := daytonatest.New(daytonatest.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return registry.MapEnviron(map[string]string{"DAYTONA_API_KEY": srv.APIKey(), "DAYTONA_API_URL": srv.URL()}, t.TempDir())
}

// modalInProcess is the modal entry's environment pointed at the
// in-process Modal, its sandboxes chrooted busybox trees.
func modalInProcess(t *testing.T) registry.Environ {
	t.Helper()
	_, env := modalServer(t)
	return env
}

// modalServer is modalInProcess with its server, whose tunnel CA a client
// of a sandbox's endpoint trusts.
func modalServer(t *testing.T) (*modaltest.Server, registry.Environ) {
	t.Helper()
	bb, err := modaltest.Busybox()
	if err != nil {
		t.Skip(err)
	}
	srv := modaltest.New(t, modaltest.Options{Busybox: bb})
	srv.PointSDK(t)
	return srv, registry.MapEnviron(map[string]string{
		"MODAL_TOKEN_ID": srv.TokenID(), "MODAL_TOKEN_SECRET": srv.TokenSecret(), "MODAL_SERVER_URL": srv.URL(),
	}, t.TempDir())
}
