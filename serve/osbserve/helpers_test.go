package osbserve

import (
	"net/http"
	"testing"

	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/serve/internal/core"
	"github.com/berth-sh/berth/serve/internal/servetest"
)

func TestMain(m *testing.M) { servetest.Main(m) }

// The keys of the tests' key file.
const testKey, otherKey = servetest.TestKey, servetest.OtherKey

var eventually = servetest.Eventually

// testEnv is a server of the OpenSandbox API alone over a provider.
type testEnv struct {
	*servetest.Env
	osb *Server
}

// anyImage lets creates name any image, as a Gym deployment that runs
// SWE-bench images per instance configures berth serve.
func anyImage(o *core.Options) { o.OpenSandbox.Images = []string{"*"} }

// backends are the providers the tests run the server over: the fake
// (chroot busybox sandboxes), the local provider (runc containers on
// servetest.BashImage; root and runc, else skipped) and the fake behind a stateless
// server.
var backends = []struct {
	name   string
	newEnv func(testing.TB, func(*core.Options)) *testEnv
}{
	{"fake", func(t testing.TB, mutate func(*core.Options)) *testEnv { return newEnv(t, mutate, nil) }},
	{"local", func(t testing.TB, mutate func(*core.Options)) *testEnv {
		return newEnvOver(t, servetest.OpenLocal(t), servetest.BashImage, mutate)
	}},
	{"fake-stateless", func(t testing.TB, mutate func(*core.Options)) *testEnv {
		return newEnvOver(t, servetest.OpenShared(t, nil), servetest.FakeImage, func(o *core.Options) {
			o.Stateless = true
			if mutate != nil {
				mutate(o)
			}
		})
	}},
}

// newEnv starts a server over the fake provider, wrapped by wrap.
func newEnv(t testing.TB, mutate func(*core.Options), wrap func(driver.Provider) driver.Provider) *testEnv {
	t.Helper()
	return newEnvOver(t, servetest.OpenFake(t, wrap), servetest.FakeImage, mutate)
}

// newEnvOver starts a server over p whose "base" template is baseImage.
func newEnvOver(t testing.TB, p *sandbox.Provider, baseImage string, mutate func(*core.Options)) *testEnv {
	t.Helper()
	e := &testEnv{}
	e.Env = servetest.Start(t, p, baseImage, mutate, func(c *core.Server) (http.Handler, func(), error) {
		e.osb = New(c)
		return e.osb, e.osb.Close, nil
	})
	return e
}
