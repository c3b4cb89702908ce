package fakeprovider

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// TestLazyExpiry: a sandbox whose deadline passed while no timer of this
// process watched it (as after a restart) is removed on the next look.
func TestLazyExpiry(t *testing.T) {
	state := t.TempDir()
	d, err := New(Options{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sb, err := d.Create(ctx, driver.Spec{Image: "host", TTL: time.Hour, Labels: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(state, sb.ID())
	unschedule(dir) // as if created by another process
	m, err := readMeta(dir)
	if err != nil {
		t.Fatal(err)
	}
	m.ExpiresAt = time.Now().Add(-time.Second)
	if err := writeMeta(dir, m); err != nil {
		t.Fatal(err)
	}

	fresh, _ := New(Options{StateDir: state})
	infos, err := fresh.List(ctx, map[string]string{"k": "v"})
	if err != nil || len(infos) != 0 {
		t.Fatalf("list = %v, %v; want the expired sandbox omitted", infos, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("expired sandbox dir still there: %v", err)
	}
	entries, _ := os.ReadDir(state)
	if len(entries) != 0 {
		t.Errorf("state dir not empty after expiry: %v", entries)
	}
	if _, err := fresh.Connect(ctx, sb.ID()); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("connect to the expired sandbox: %v, want NotFound", err)
	}
}
