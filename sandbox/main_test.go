package sandbox_test

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/berth-sh/berth/internal/testing/fakeprovider"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/driver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newFake opens a fake driver on a fresh state dir; the test gets the
// driver too, to look behind the wrapper.
func newFake(t *testing.T, opts fakeprovider.Options) (*sandbox.Provider, driver.Provider) {
	t.Helper()
	if opts.StateDir == "" {
		opts.StateDir = t.TempDir()
	}
	d, err := fakeprovider.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	p := sandbox.NewProvider("fake", d)
	t.Cleanup(func() { p.Close() })
	return p, d
}

func create(t *testing.T, p *sandbox.Provider) *sandbox.Sandbox {
	t.Helper()
	sb, err := p.Create(t.Context(), sandbox.Spec{Image: "host"})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() {
		_ = p.Delete(context.Background(), sb.ID())
		sb.Close()
	})
	return sb
}
