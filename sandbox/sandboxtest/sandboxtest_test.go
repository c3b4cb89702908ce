package sandboxtest_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/berth-sh/berth/internal/testing/fakeprovider"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/sandboxtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestNativeTrees runs the suite against the fake provider with
// driver.TreeUploader and TreeDownloader, so Upload and Download take the
// driver path, links included. internal/testing/fakeprovider runs the fallback path.
func TestNativeTrees(t *testing.T) {
	sandboxtest.Run(t, fakeHarness(fakeprovider.Options{StateDir: t.TempDir(), NativeTrees: true}))
}

// fakeHarness opens fake providers with opts.
func fakeHarness(opts fakeprovider.Options) sandboxtest.Harness {
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

// TestMinimalProvider runs the suite against a fake provider whose handles
// implement nothing optional (no SetTimeout, no Signal, no trees): its
// Capabilities say so, and the gated cases check that each such call is
// refused as NotSupported instead of skipping.
func TestMinimalProvider(t *testing.T) {
	opts := fakeprovider.Options{StateDir: t.TempDir(), Minimal: true}
	caps := fakeprovider.CapabilitiesOf(opts)
	if caps.SetTimeout || caps.Signal || caps.TreeUpload || caps.TreeDownload || caps.Pause {
		t.Fatalf("minimal handles claim %+v", caps)
	}
	sandboxtest.Run(t, fakeHarness(opts))
}
