package serve

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
	bashImage = servetest.BashImage
)

var (
	openFake   = servetest.OpenFake
	eventually = servetest.Eventually
)

// testEnv is the whole server, both APIs, over a provider.
type testEnv struct {
	*servetest.Env
	s *Server
}

// anyImage lets OpenSandbox creates name any image.
func anyImage(o *Options) { o.OpenSandbox.Images = []string{"*"} }

// newEnv starts a server over the fake provider, wrapped by wrap.
func newEnv(t testing.TB, mutate func(*Options), wrap func(driver.Provider) driver.Provider) *testEnv {
	t.Helper()
	return newEnvOver(t, openFake(t, wrap), servetest.FakeImage, mutate)
}

// newLocalEnv starts a server over the local provider whose "base" is
// bashImage.
func newLocalEnv(t testing.TB, mutate func(*Options)) *testEnv {
	t.Helper()
	return newEnvOver(t, servetest.OpenLocal(t), bashImage, mutate)
}

// newEnvOver starts a server over p whose "base" template is baseImage.
func newEnvOver(t testing.TB, p *sandbox.Provider, baseImage string, mutate func(*Options)) *testEnv {
	t.Helper()
	e := &testEnv{}
	e.Env = servetest.Start(t, p, baseImage, mutate, func(c *core.Server) (http.Handler, func(), error) {
		var err error
		if e.s, err = newServer(c); err != nil {
			return nil, nil, err
		}
		return e.s, func() { e.s.osb.Close(); e.s.e2b.Close() }, nil
	})
	return e
}
