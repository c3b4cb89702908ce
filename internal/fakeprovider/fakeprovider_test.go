package fakeprovider_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/berth-sh/berth/internal/fakeprovider"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/sandboxtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// harness opens fake providers on one state dir per test.
func harness(t *testing.T, opts fakeprovider.Options) sandboxtest.Harness {
	if opts.StateDir == "" {
		opts.StateDir = t.TempDir()
	}
	return sandboxtest.Harness{
		Open: func(t *testing.T) *sandbox.Provider {
			d, err := fakeprovider.New(opts)
			if err != nil {
				t.Fatal(err)
			}
			return sandbox.NewProvider("fake", d)
		},
		Spec: func() sandbox.Spec { return sandbox.Spec{Image: "host"} },
	}
}

// TestConformance runs the suite with trees moved by plain file calls; the
// sandboxtest package's own test covers the TreeUploader path.
func TestConformance(t *testing.T) {
	h := harness(t, fakeprovider.Options{})
	h.Skip = map[sandboxtest.Feature]string{
		sandboxtest.FeatureLinks: "without NativeTrees, trees go through WriteFile, which cannot make links",
	}
	sandboxtest.Run(t, h)
}
