package daytona_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/berth-sh/berth/builtin"
	"github.com/berth-sh/berth/providers/daytona"
	"github.com/berth-sh/berth/providers/daytona/daytonatest"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/sandboxtest"
	"github.com/berth-sh/berth/smoke"
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
// openSandbox starts a server with opts, opens the driver on it and
// creates one sandbox of spec, deleted and closed when the test ends.
func openSandbox(t *testing.T, opts daytonatest.Options) (*daytonatest.Server, *sandbox.Provider, *sandbox.Sandbox) {
	t.Helper()
	srv := newServer(t, opts)
	p := sandbox.NewProvider("daytona", openDriver(t, srv, nil))
	sb, err := p.Create(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sb.Delete(context.Background())
		sb.Close()
	})
	return srv, p, sb
}

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

// TestConformance runs the shared suite against the driver and the
// in-process server, on sandboxes of the linux-vm class, which can do all
// the driver claims (containers cannot pause or fork; builds from images
// are walked by TestSchema and the golden episode).
func TestConformance(t *testing.T) {
	needCommands(t)
	srv := vmServer(t)
	sandboxtest.Run(t, sandboxtest.Harness{
		Open: func(t *testing.T) *sandbox.Provider {
			return sandbox.NewProvider("daytona", openDriver(t, srv, nil))
		},
		Spec: func() sandbox.Spec { return sandbox.Spec{Image: daytona.SnapshotPrefix + vmSnapshot} },
	})
}

// TestGoldenEpisode runs `berth smoke`'s golden episode through the
// registry's daytona entry, pointed at the in-process server by
// DAYTONA_API_URL as a user would point it.
func TestGoldenEpisode(t *testing.T) {
	needCommands(t)
	srv := newServer(t, daytonatest.Options{})
	env := registry.MapEnviron(map[string]string{"DAYTONA_API_KEY": srv.APIKey(), "DAYTONA_API_URL": srv.URL()}, t.TempDir())
	rep, err := smoke.Run(t.Context(), smoke.Options{Backend: "daytona", Registry: builtin.Registry(), Env: env}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	rep.Print(&out)
	if !rep.Pass || rep.Reward != 1 || rep.ExitStatus != smoke.Submitted {
		t.Fatalf("golden episode on daytona:\n%s", out.String())
	}
	t.Logf("\n%s", out.String())
	if live := srv.Live(); len(live) > 0 {
		for _, id := range live {
			if st := srv.State(id); st != "destroying" {
				t.Errorf("sandbox %s left %s after the episode", id, st)
			}
		}
	}
}

// TestLive runs the suite against Daytona itself when a key is at hand.
// DAYTONA_API_URL and DAYTONA_TARGET pick the endpoint and region,
// DAYTONA_TEST_IMAGE the image (debian:bookworm-slim), and
// DAYTONA_DISK_QUOTA_GB the account's disk quota (30, tier 1).
func TestLive(t *testing.T) {
	key := liveKey(t)
	image := os.Getenv("DAYTONA_TEST_IMAGE")
	if image == "" {
		image = "debian:bookworm-slim"
	}
	quota := 30
	if q, err := strconv.Atoi(os.Getenv("DAYTONA_DISK_QUOTA_GB")); err == nil && q > 0 {
		quota = q
	}
	opts := daytona.Options{
		APIKey: registry.Secret(key), BaseURL: os.Getenv("DAYTONA_API_URL"), Target: os.Getenv("DAYTONA_TARGET"),
		DiskQuotaGB: quota, DeleteOnStop: true,
	}
	d, err := daytona.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	sandboxtest.Run(t, sandboxtest.Harness{
		// One driver value for all cases, so that the disk cap sees them all.
		Open: func(t *testing.T) *sandbox.Provider { return sandbox.NewProvider("daytona", noClose{d}) },
		Spec: func() sandbox.Spec { return sandbox.Spec{Image: image, TTL: 30 * time.Minute} },
	})
}

// noClose shares one driver among the suite's provider values.
type noClose struct{ *daytona.Provider }

func (noClose) Close() error { return nil }
