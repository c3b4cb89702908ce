package k8s_test

import (
	"testing"
	"time"

	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/sandboxtest"
)

// TestSuite runs the conformance suite on pods of the test control plane,
// backed by the node shim's local sandboxes, reached through the API
// server's port-forward.
func TestSuite(t *testing.T) {
	ns := namespace(t)
	sandboxtest.Run(t, sandboxtest.Harness{
		Open: func(t *testing.T) *sandbox.Provider {
			return sandbox.NewProvider("k8s", openDriver(t, options(ns)))
		},
		Spec: func() sandbox.Spec { return sandbox.Spec{Image: local.DefaultImage, TTL: 10 * time.Minute} },
		// Connect reads the TTL annotation: an expired sandbox is NotFound
		// at once, before the reaper deletes it.
		ExpiryGrace: 3 * time.Second,
	})
}
