package e2bserve

import (
	"net/http"
	"testing"

	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/serve/internal/core"
	"github.com/berth-sh/berth/serve/internal/servetest"
)

func TestMain(m *testing.M) { servetest.Main(m) }

const (
	testKey   = servetest.TestKey
	otherKey  = servetest.OtherKey
	bashImage = servetest.BashImage
)

type response = servetest.Response

var (
	openFake        = servetest.OpenFake
	openLocal       = servetest.OpenLocal
	openLocalLogged = servetest.OpenLocalLogged
	eventually      = servetest.Eventually
	freePort        = servetest.FreePort
)

// testEnv is a server of the E2B API alone over a provider.
type testEnv struct {
	*servetest.Env
	api *API
}

// newEnv starts a server over the fake provider, wrapped by wrap.
func newEnv(t testing.TB, mutate func(*core.Options), wrap func(driver.Provider) driver.Provider) *testEnv {
	t.Helper()
	return newEnvOver(t, openFake(t, wrap), servetest.FakeImage, mutate)
}

// newLocalEnv starts a server over the local provider whose "base" is
// bashImage.
func newLocalEnv(t testing.TB, mutate func(*core.Options)) *testEnv {
	t.Helper()
	return newEnvOver(t, openLocal(t), bashImage, mutate)
}

// newStatelessEnv is one stateless server over the shared fake.
func newStatelessEnv(t testing.TB, mutate func(*core.Options)) *testEnv {
	t.Helper()
	return newEnvOver(t, servetest.OpenShared(t, nil), servetest.FakeImage, func(o *core.Options) {
		o.Stateless = true
		if mutate != nil {
			mutate(o)
		}
	})
}

// newEnvOver starts a server over p whose "base" template is baseImage.
func newEnvOver(t testing.TB, p *sandbox.Provider, baseImage string, mutate func(*core.Options)) *testEnv {
	t.Helper()
	e := &testEnv{}
	e.Env = servetest.Start(t, p, baseImage, mutate, func(c *core.Server) (http.Handler, func(), error) {
		var err error
		if e.api, err = New(c); err != nil {
			return nil, nil, err
		}
		return e.api, e.api.Close, nil
	})
	return e
}
