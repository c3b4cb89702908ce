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

// TestSuiteAgentSandbox runs the same suite in agent-sandbox mode: each
// sandbox a SandboxClaim on a warm pool of two, given its pod by
// agent-sandbox's controller (v0.5.0, built by build.sh with
// BERTH_K8S_AGENT_SANDBOX=1) and backed by the node shim.
func TestSuiteAgentSandbox(t *testing.T) {
	ns := namespace(t)
	o := claimOptions(t, ns, 2)
	sandboxtest.Run(t, sandboxtest.Harness{
		Open: func(t *testing.T) *sandbox.Provider {
			return sandbox.NewProvider("k8s", openDriver(t, o))
		},
		Spec:        func() sandbox.Spec { return sandbox.Spec{Image: local.DefaultImage, TTL: 10 * time.Minute} },
		ExpiryGrace: 3 * time.Second,
	})
}
