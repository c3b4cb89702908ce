package job_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/berth-sh/berth/harbor/job"
	"github.com/berth-sh/berth/internal/harbortest"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/sandbox/driver"
)

// TestJobAsksForAPool: a job whose trials all start from one image opens
// its provider with BERTH_POOL_SIZE set (local then keeps sandboxes started
// ahead); a job of mixed images does not, and the launcher's own value wins.
func TestJobAsksForAPool(t *testing.T) {
	base, err := harbortest.Registry(t, nil).Lookup("fake")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string // BERTH_POOL_SIZE at each Open, "unset" when absent
	reg := registry.New()
	entry := base
	entry.Open = func(ctx context.Context, cfg registry.Config) (driver.Provider, error) {
		v, ok := cfg.Env.Lookup(registry.PoolSizeVar)
		if !ok {
			v = "unset"
		}
		mu.Lock()
		seen = append(seen, v)
		mu.Unlock()
		return base.Open(ctx, cfg)
	}
	reg.Register(entry)

	oneImage, mixed := t.TempDir(), t.TempDir()
	for _, name := range []string{"a", "b"} {
		harbortest.Task(t, oneImage, name, harbortest.TOML("30.0", "30.0"), harbortest.SolveWrite, harbortest.TestAnswer, nil)
	}
	harbortest.Task(t, mixed, "a", harbortest.TOMLImage("host", "30.0", "30.0"), harbortest.SolveWrite, harbortest.TestAnswer, nil)
	harbortest.Task(t, mixed, "b", harbortest.TOMLImage("other:1", "30.0", "30.0"), harbortest.SolveWrite, harbortest.TestAnswer, nil)

	cases := []struct {
		name     string
		tasks    string
		attempts int
		env      map[string]string
		want     string
	}{
		{"one image", oneImage, 2, nil, "2"},
		{"two trials", oneImage, 1, nil, "1"},
		{"one trial", oneImage, 1, nil, "unset"}, // NTasks 1 below
		{"mixed images", mixed, 1, nil, "unset"},
		{"launcher says", oneImage, 3, map[string]string{registry.PoolSizeVar: "0"}, "0"},
	}
	for _, c := range cases {
		seen = nil
		cfg := job.Config{JobName: strings.ReplaceAll(c.name, " ", "-"), JobsDir: t.TempDir(), TasksPath: c.tasks, Backend: "fake",
			NConcurrent: 1, NAttempts: c.attempts, Limits: fastLimits()}
		if c.name == "one trial" {
			cfg.NTasks = 1
		}
		if _, _, err := job.Run(context.Background(), cfg, job.Options{Registry: reg, Env: registry.MapEnviron(c.env, t.TempDir())}); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(seen) != 1 || seen[0] != c.want {
			t.Errorf("%s: %s at Open = %v, want %q", c.name, registry.PoolSizeVar, seen, c.want)
		}
	}
}
