package servetest

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/berth-sh/berth/internal/testing/fakeprovider"
	"github.com/berth-sh/berth/internal/testing/harbortest"
	"github.com/berth-sh/berth/internal/testing/localtest"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/driver"
)

// bashProvider gives every fake sandbox a /bin/bash.
type bashProvider struct{ driver.Provider }

func (p bashProvider) Create(ctx context.Context, spec driver.Spec) (driver.Sandbox, error) {
	sb, err := p.Provider.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	if err := sb.WriteFile(ctx, "/bin/bash", strings.NewReader(localtest.BashScript), 0o755); err != nil {
		_ = sb.Delete(ctx)
		return nil, err
	}
	return sb, nil
}

// FakeImage is the fake provider's image: the host's root.
const FakeImage = "host"

// OpenFake opens the fake provider (chroot busybox sandboxes with a
// /bin/bash), wrapped by wrap when it is not nil.
func OpenFake(t testing.TB, wrap func(driver.Provider) driver.Provider) *sandbox.Provider {
	t.Helper()
	opts := fakeprovider.Options{StateDir: t.TempDir(), Busybox: harbortest.Busybox(t)}
	r := registry.New()
	r.Register(registry.Entry{
		Name:         "fake",
		Summary:      "fake provider (tests only)",
		DefaultImage: FakeImage,
		Capabilities: func() sandbox.Capabilities { return fakeprovider.CapabilitiesOf(opts) },
		Open: func(context.Context, registry.Config) (driver.Provider, error) {
			d, err := fakeprovider.New(opts)
			if err != nil {
				return nil, err
			}
			d = bashProvider{d}
			if wrap != nil {
				d = wrap(d)
			}
			return d, nil
		},
	})
	p, err := r.Open(context.Background(), "fake", harbortest.Env(t), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// Shared says the fake's sandboxes are shared, which they are: the fake
// keeps them in a state directory every provider value on it reads.
type Shared struct{ driver.Provider }

// Capabilities adds SharedState.
func (p Shared) Capabilities() driver.Capabilities {
	c := p.Provider.Capabilities()
	c.SharedState = true
	return c
}

// OpenShared opens the fake provider with shared state (Shared), wrapped
// inside by wrap when it is not nil, for a stateless server.
func OpenShared(t testing.TB, wrap func(driver.Provider) driver.Provider) *sandbox.Provider {
	t.Helper()
	return OpenFake(t, func(d driver.Provider) driver.Provider {
		if wrap != nil {
			d = wrap(d)
		}
		return Shared{d}
	})
}

// BackendImages are the images the OpenSandbox tests name per backend.
var BackendImages = map[string]string{"fake": FakeImage, "local": BashImage, "fake-stateless": FakeImage}

// SpecRecorder is a backend that keeps the Spec of every create.
type SpecRecorder struct {
	driver.Provider
	mu    sync.Mutex
	specs []driver.Spec
}

// Create records spec, then creates.
func (r *SpecRecorder) Create(ctx context.Context, spec driver.Spec) (driver.Sandbox, error) {
	r.mu.Lock()
	r.specs = append(r.specs, spec)
	r.mu.Unlock()
	return r.Provider.Create(ctx, spec)
}

// Specs are the creates' specs so far.
func (r *SpecRecorder) Specs() []driver.Spec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.specs)
}

// HostFake opens the fake provider without a chroot (no root, no busybox
// needed: for tests of the control planes alone), recording specs.
func HostFake(t testing.TB) (*sandbox.Provider, *SpecRecorder) {
	t.Helper()
	d, err := fakeprovider.New(fakeprovider.Options{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	rec := &SpecRecorder{Provider: d}
	p := sandbox.NewProvider("fake", rec)
	t.Cleanup(func() { p.Close() })
	return p, rec
}
