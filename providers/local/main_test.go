package local_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/berth-sh/berth/internal/testing/localtest"
	"github.com/berth-sh/berth/internal/testing/testbin"
	"github.com/berth-sh/berth/providers/local"
)

// The package's tests share one state directory (so that images are seeded
// and unpacked once) and one cgroup parent of their own, which TestMain
// checks is empty at the end, with no mount left under the state dir.
var (
	stateDir     string
	agentBin     string // berth-agent, mounted into the sandboxes
	berthBin     string // the berth CLI, for tests that run it as a program
	cgroupParent string
	skipReason   string
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperMain())
	}
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	if skipReason = testbin.LocalMissing(); skipReason == "" {
		var err error
		if berthBin, err = testbin.Berth(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if agentBin, err = testbin.Agent(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer testbin.Cleanup()
		// Short: the agent's socket path lives under it (108-byte limit).
		if stateDir, err = os.MkdirTemp("", "berth-local-"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		cgroupParent = "berth-test-" + hex.EncodeToString(b)
	}
	code := m.Run()
	if attacker.path != "" {
		os.RemoveAll(filepath.Dir(attacker.path))
	}
	if stateDir != "" {
		// Sweep also removes the state dir, unless a mount is left under it.
		if left := localtest.Sweep(options(), stateDir); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "leftovers after the tests:\n  %s\n", strings.Join(left, "\n  "))
			code = 1
		}
	}
	if err := goleak.Find(goleak.IgnoreTopFunction("github.com/berth-sh/berth/internal/reap.Loop")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	return code
}

// needRoot skips a test that runs sandboxes when TestMain found it cannot.
func needRoot(t testing.TB) {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
}

func options() local.Options {
	return local.Options{StateDir: stateDir, AgentBinary: agentBin, CgroupParent: cgroupParent}
}

// newDriver opens a fresh driver value on the shared state dir.
func newDriver(t testing.TB) *local.Provider {
	t.Helper()
	needRoot(t)
	p, err := local.New(options())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// The package's tests look for mounts and cgroups of their own sandboxes
// with the same walks TestMain's sweep uses.
var (
	mountsUnder = localtest.MountsUnder
	cgroupDirs  = localtest.CgroupDirs
)
