package local_test

import (
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/sandboxtest"
)

func openProvider(t *testing.T) *sandbox.Provider {
	if _, ok := pooledTests.Load(t); ok {
		return openWarmPool(t)
	}
	return sandbox.NewProvider("local", newDriver(t))
}

// pooledTests are the tests whose openProvider gives a provider with a
// pool (see TestAttacksPooled), with the Specs besides the default ones
// whose keys the pool is to fill.
var pooledTests sync.Map // *testing.T -> []sandbox.Spec

// poolWarmSpecs are the extra Specs of pooled tests, by name.
var poolWarmSpecs = map[string][]sandbox.Spec{
	"FillDisk":           {{Image: local.DefaultImage, Resources: sandbox.Resources{StorageMB: attackDiskMB}}},
	"FillDiskThroughEtc": {{Image: local.DefaultImage, Resources: sandbox.Resources{StorageMB: attackDiskMB}}},
	"EtcEditable":        {{Image: local.DefaultImage, Resources: sandbox.Resources{StorageMB: attackDiskMB}}},
}

// openWarmPool opens a provider whose pool has two ready sandboxes per
// network mode (and per extra Spec), and fails the test at its end unless
// one was used.
func openWarmPool(t *testing.T) *sandbox.Provider {
	t.Helper()
	d := openPooled(t, local.Pool{Size: 2})
	warm(t, d, sandbox.Spec{Image: local.DefaultImage})
	extra, _ := pooledTests.Load(t)
	for _, spec := range extra.([]sandbox.Spec) {
		warm(t, d, spec)
	}
	if _, err := exec.LookPath("slirp4netns"); err == nil {
		warm(t, d, sandbox.Spec{Image: local.DefaultImage, Network: sandbox.Network{Mode: sandbox.NetworkPublic}})
	}
	t.Cleanup(func() {
		if local.PoolHanded(d) == 0 {
			t.Errorf("no sandbox came from the pool: the test proves nothing about pooled ones")
		}
	})
	return sandbox.NewProvider("local", d)
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
		StorageMB:   32,
	})
}
