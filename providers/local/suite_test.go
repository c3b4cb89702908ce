package local_test

import (
	"testing"
	"time"

	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/sandboxtest"
)

func openProvider(t *testing.T) *sandbox.Provider {
	return sandbox.NewProvider("local", newDriver(t))
}

// TestSuite runs the conformance suite on real sandboxes of the default
// image (seeded from the host's busybox on first use). Nothing is skipped.
func TestSuite(t *testing.T) {
	needRoot(t)
	sandboxtest.Run(t, sandboxtest.Harness{
		Open: openProvider,
		Spec: func() sandbox.Spec { return sandbox.Spec{Image: local.DefaultImage, TTL: 10 * time.Minute} },
		// The agent exits at the deadline; the next Connect sees its
		// socket refuse at once.
		ExpiryGrace: 3 * time.Second,
	})
}
