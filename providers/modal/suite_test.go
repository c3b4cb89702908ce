package modal_test

import (
	"crypto/tls"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/berth-sh/berth/providers/modal"
	"github.com/berth-sh/berth/providers/modal/modaltest"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/sandboxtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testImage is what the suite asks for; the in-process server runs every
// image on the host.
const testImage = "debian:bookworm-slim"

// serve starts an in-process server and points the SDK at it through the
// process environment, which is where the SDK reads MODAL_SERVER_URL. The
// host's own Modal configuration is kept out.
func serve(t *testing.T) *modaltest.Server {
	t.Helper()
	srv := modaltest.New(t, modaltest.Options{})
	serveAt(t, srv)
	return srv
}

// serveChroot is serve with commands chrooted into a busybox tree, so that
// absolute paths in commands are sandbox paths; it skips without root or a
// static busybox.
func serveChroot(t *testing.T) *modaltest.Server {
	t.Helper()
	bb, err := modaltest.Busybox()
	if err != nil {
		t.Skip(err)
	}
	srv := modaltest.New(t, modaltest.Options{Busybox: bb})
	serveAt(t, srv)
	return srv
}

// serveAt points the process environment at srv.
func serveAt(t *testing.T, srv *modaltest.Server) {
	t.Helper()
	srv.PointSDK(t)
	t.Setenv("MODAL_TOKEN_ID", "")
	t.Setenv("MODAL_TOKEN_SECRET", "")
}

// openDriver opens the driver against srv; mod may change the options.
func openDriver(t testing.TB, srv *modaltest.Server, mod func(*modal.Options)) *modal.Provider {
	t.Helper()
	opts := modal.Options{TokenID: srv.TokenID(), TokenSecret: srv.TokenSecret(), Getenv: os.Getenv}
	if mod != nil {
		mod(&opts)
	}
	d, err := modal.New(opts)
	if err != nil {
		t.Fatalf("open modal driver: %v", err)
	}
	return d
}

// TestSuite runs the conformance suite with commands as host processes.
func TestSuite(t *testing.T) { runSuite(t, serve(t)) }

// TestSuiteChroot runs it with commands chrooted into busybox sandboxes.
func TestSuiteChroot(t *testing.T) { runSuite(t, serveChroot(t)) }

func runSuite(t *testing.T, srv *modaltest.Server) {
	sandboxtest.Run(t, sandboxtest.Harness{
		Open: func(t *testing.T) *sandbox.Provider {
			return sandbox.NewProvider("modal", openDriver(t, srv, nil))
		},
		Spec:        func() sandbox.Spec { return sandbox.Spec{Image: testImage, TTL: 10 * time.Minute} },
		EndpointTLS: &tls.Config{RootCAs: srv.TunnelRoots()},
	})
	if left := srv.Running(); len(left) != 0 {
		t.Errorf("sandboxes still running after the suite: %v", left)
	}
}
