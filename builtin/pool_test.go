package builtin_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-sh/berth/builtin"
	"github.com/berth-sh/berth/internal/testing/testbin"
	localprovider "github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/sandbox"
)

// TestLocalPoolByDefault: the local entry opens with sandboxes started
// ahead (from the first create on) unless BERTH_POOL_SIZE=0. A ready
// sandbox is a directory under sandboxes/ that List does not show; Close
// removes them.
func TestLocalPoolByDefault(t *testing.T) {
	testbin.NeedLocal(t)
	agent, err := testbin.Agent()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pool  string // BERTH_POOL_SIZE; "" unset
		ready int
	}{{"", 2}, {"0", 0}} {
		t.Run("BERTH_POOL_SIZE="+tc.pool, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			state := t.TempDir()
			vars := map[string]string{localprovider.EnvStateDir: state, localprovider.EnvAgentBinary: agent}
			if tc.pool != "" {
				vars[registry.PoolSizeVar] = tc.pool
			}
			p, err := builtin.Registry().Open(ctx, "local", registry.MapEnviron(vars, t.TempDir()), nil)
			if err != nil {
				t.Fatal(err)
			}
			closed := false
			defer func() {
				if !closed {
					p.Close()
				}
			}()
			for range 2 {
				sb, err := p.Create(ctx, sandbox.Spec{Image: localprovider.DefaultImage, TTL: time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				if err := sb.Delete(ctx); err != nil {
					t.Fatal(err)
				}
				sb.Close()
			}
			dirs := func() int {
				ents, _ := os.ReadDir(filepath.Join(state, "sandboxes"))
				return len(ents)
			}
			// The pool fills one sandbox at a time, ~40 ms each; give it 20 s.
			deadline := time.Now().Add(20 * time.Second)
			for dirs() < tc.ready && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			time.Sleep(300 * time.Millisecond) // a pool that should not fill has had time to
			if n := dirs(); n != tc.ready {
				t.Fatalf("%d sandbox directories after two creates, want %d ready", n, tc.ready)
			}
			if infos, err := p.List(ctx, nil); err != nil || len(infos) != 0 {
				t.Fatalf("List = %v, %v; want no sandbox (ready ones are not listed)", infos, err)
			}
			closed = true
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			if n := dirs(); n != 0 {
				t.Fatalf("%d sandbox directories left after Close", n)
			}
		})
	}
}
