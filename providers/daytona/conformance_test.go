package daytona_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/berth-sh/berth/providers/daytona"
	"github.com/berth-sh/berth/providers/daytona/daytonatest"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/sandboxtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newServer starts an in-process Daytona that ends with the test.
func newServer(t *testing.T, opts daytonatest.Options) *daytonatest.Server {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	srv, err := daytonatest.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// openDriver opens the driver on srv, changed by mod; it is closed when the
// test ends.
func openDriver(t *testing.T, srv *daytonatest.Server, mod func(*daytona.Options)) *daytona.Provider {
	t.Helper()
	opts := daytona.Options{BaseURL: srv.URL(), APIKey: registry.Secret(srv.APIKey())}
	if mod != nil {
		mod(&opts)
	}
	d, err := daytona.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func needCommands(t *testing.T) {
	t.Helper()
	if why := daytonatest.Available(); why != "" {
		t.Skip(why)
	}
}

// suiteSkips are the features the driver lacks, with the reasons.
var suiteSkips = map[sandboxtest.Feature]string{
	sandboxtest.FeatureExpiry: "Daytona's auto-stop counts whole minutes of inactivity, so the suite's 2 s deadline cannot be set; TestAutoStopExpires checks expiry on a shortened clock",
	sandboxtest.FeatureLinks:  "the driver has no TreeUploader and the toolbox no symlink call; uploads go file by file",
}

// TestConformance runs the shared suite against the driver and the
// in-process server.
func TestConformance(t *testing.T) {
	needCommands(t)
	srv := newServer(t, daytonatest.Options{})
	sandboxtest.Run(t, sandboxtest.Harness{
		Open: func(t *testing.T) *sandbox.Provider {
			return sandbox.NewProvider("daytona", openDriver(t, srv, nil))
		},
		Spec: func() sandbox.Spec { return sandbox.Spec{Image: "busybox:1.36"} },
		Skip: suiteSkips,
	})
}
