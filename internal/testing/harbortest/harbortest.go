package harbortest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/berth-sh/berth/internal/testing/fakeengine"
	"github.com/berth-sh/berth/internal/testing/fakeprovider"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/driver"
)

// Busybox returns the static busybox the fake's chroot mode needs, or
// skips the test. The chroot mode works without root where unprivileged
// user namespaces do (fakeengine.Busybox), so the runner's and the
// server's tests run as any user.
func Busybox(t testing.TB) string {
	t.Helper()
	bb, err := fakeengine.Busybox()
	if err != nil {
		t.Skip(err)
	}
	return bb
}

// Registry returns a registry with one entry, "fake", opening the fake
// provider in chroot mode on a state dir of the test's.
func Registry(t testing.TB, faults *fakeprovider.Injector) *registry.Registry {
	bb := Busybox(t)
	opts := fakeprovider.Options{StateDir: t.TempDir(), Faults: faults, Busybox: bb, NativeTrees: true}
	r := registry.New()
	r.Register(registry.Entry{
		Name:         "fake",
		Summary:      "fault-injecting fake provider (tests only)",
		DefaultImage: "host",
		Capabilities: func() sandbox.Capabilities { return fakeprovider.CapabilitiesOf(opts) },
		Open: func(context.Context, registry.Config) (driver.Provider, error) {
			return fakeprovider.New(opts)
		},
	})
	return r
}

// Env is an empty worker environment.
func Env(t testing.TB) registry.Environ { return registry.MapEnviron(nil, t.TempDir()) }

// Task writes a task directory under parent with a no-network task.toml
// whose [agent] and [verifier] timeouts are given, plus solve.sh and test.sh.
// Extra files override or add (path -> contents).
func Task(t testing.TB, parent, name, toml, solve, test string, extra map[string]string) string {
	t.Helper()
	dir := filepath.Join(parent, name)
	files := map[string]string{
		"task.toml":         toml,
		"instruction.md":    "Solve " + name + ".\n",
		"solution/solve.sh": solve,
		"tests/test.sh":     test,
	}
	for k, v := range extra {
		files[k] = v
	}
	for p, body := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TOML is a task.toml for the fake provider with the given timeouts.
func TOML(agentSec, verifierSec string) string { return TOMLImage("host", agentSec, verifierSec) }

// TOMLImage is a no-network task.toml on the given image.
func TOMLImage(image, agentSec, verifierSec string) string {
	return `schema_version = "1.1"
[agent]
timeout_sec = ` + agentSec + `
[verifier]
timeout_sec = ` + verifierSec + `
[environment]
docker_image = "` + image + `"
allow_internet = false
`
}

// Scripts users write.
const (
	SolveWrite   = "#!/bin/sh\necho 42 > /tmp/answer\n"
	TestAnswer   = "#!/bin/sh\nif [ \"$(cat /tmp/answer 2>/dev/null)\" = 42 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n"
	TestJSON     = "#!/bin/sh\necho '{\"reward\": 0.5, \"accuracy\": 0.75, \"tests_passed\": 3}' > /logs/verifier/reward.json\n"
	TestNoReward = "#!/bin/sh\necho 'forgot to write a reward'\n"
	TestEmpty    = "#!/bin/sh\n: > /logs/verifier/reward.txt\n"
	TestGarbage  = "#!/bin/sh\necho 'PASSED' > /logs/verifier/reward.txt\n"
	SolveSleep   = "#!/bin/sh\nsleep 30\n"
	TestSleep    = "#!/bin/sh\nsleep 30\n"
	SolveFail    = "#!/bin/sh\necho 'cannot solve' >&2\nexit 3\n"
)
