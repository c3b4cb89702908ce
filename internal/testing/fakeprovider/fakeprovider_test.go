package fakeprovider_test

import (
	"context"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/berth-sh/berth/internal/testing/fakeengine"
	"github.com/berth-sh/berth/internal/testing/fakeprovider"
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
	sandboxtest.Run(t, harness(t, fakeprovider.Options{}))
}

// TestConformanceChroot runs the suite with commands chrooted into a
// busybox root, the mode the runner's tests use.
func TestConformanceChroot(t *testing.T) {
	bb := busyboxOrSkip(t)
	h := harness(t, fakeprovider.Options{Busybox: bb, NativeTrees: true})
	sandboxtest.Run(t, h)
}

// TestChrootKeepsAbsolutePathsInside: a script writing an absolute path
// writes inside the sandbox, never on the host.
func TestChrootKeepsAbsolutePathsInside(t *testing.T) {
	bb := busyboxOrSkip(t)
	p := harness(t, fakeprovider.Options{Busybox: bb}).Open(t)
	ctx := context.Background()
	sb, err := p.Create(ctx, sandbox.Spec{Image: "host"})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Delete(ctx)
	marker := "/berth-fake-chroot-" + sb.ID()
	res, err := sb.Run(ctx, sandbox.Command{Args: []string{"sh", "-c", "echo inside > " + marker + " && cat " + marker}})
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "inside\n" {
		t.Fatalf("run = %+v, %v", res, err)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		os.Remove(marker)
		t.Fatalf("the script wrote %s on the host (stat err %v)", marker, err)
	}
	if b, err := sb.ReadFile(ctx, marker); err != nil || string(b) != "inside\n" {
		t.Fatalf("ReadFile(%s) = %q, %v", marker, b, err)
	}
}

func busyboxOrSkip(t *testing.T) string {
	t.Helper()
	bb, err := fakeengine.Busybox()
	if err != nil {
		t.Skip(err)
	}
	return bb
}
