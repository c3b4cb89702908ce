package sandboxtest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/berth-sh/berth/sandbox"
)

// testFork: with Capabilities.Fork a fork holds the files of its source
// and goes its own way; without it Fork is NotSupported. A provider may
// fork only some of its sandboxes (Daytona: those of a VM class): a
// NotSupported fork of the harness's sandbox skips, saying so.
func testFork(t *testing.T, h Harness) {
	ctx, p, sb := fresh(t, h)
	if !p.Capabilities().Fork {
		_, err := sb.Fork(ctx)
		wantClass(t, "fork without Capabilities.Fork", err, sandbox.NotSupported)
		return
	}
	dir := workDir(t, ctx, sb)
	if err := sb.WriteFile(ctx, dir+"/before", []byte("source"), 0o644); err != nil {
		t.Fatal(err)
	}
	fork, err := sb.Fork(ctx)
	if sandbox.ClassOf(err) == sandbox.NotSupported {
		t.Skipf("the provider forks, but not the harness's sandboxes: %v", err)
	}
	if err != nil {
		t.Fatalf("fork: %v", err)
	}
	t.Cleanup(func() {
		_ = fork.Delete(testContext(t))
		_ = fork.Close()
	})
	if got, err := fork.ReadFile(ctx, dir+"/before"); err != nil || string(got) != "source" {
		t.Fatalf("the fork's copy of a file written before: %q %v", got, err)
	}
	if err := fork.WriteFile(ctx, dir+"/before", []byte("fork"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := sb.ReadFile(ctx, dir+"/before"); err != nil || string(got) != "source" {
		t.Fatalf("the source after a write in the fork: %q %v", got, err)
	}
}

// testSnapshot: with Capabilities.Snapshot a sandbox made from a snapshot
// holds the files written before it, not those written after; without it
// Snapshot is NotSupported (testOptionalFeatures).
func testSnapshot(t *testing.T, h Harness) {
	ctx, p, sb := fresh(t, h)
	if !p.Capabilities().Snapshot {
		t.Skip("the provider has no snapshots (optional-features checks the refusal)")
	}
	dir := workDir(t, ctx, sb)
	if err := sb.WriteFile(ctx, dir+"/kept", []byte("before"), 0o640); err != nil {
		t.Fatal(err)
	}
	img, err := sb.Snapshot(ctx)
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if err := sb.WriteFile(ctx, dir+"/later", []byte("after"), 0o644); err != nil {
		t.Fatal(err)
	}
	restored := create(t, h, p, func(s *sandbox.Spec) { s.Image, s.Build = img, nil })
	if got, err := restored.ReadFile(ctx, dir+"/kept"); err != nil || string(got) != "before" {
		t.Fatalf("the file written before the snapshot: %q %v", got, err)
	}
	if _, err := restored.Stat(ctx, dir+"/later"); sandbox.ClassOf(err) != sandbox.NotFound {
		t.Errorf("a file written after the snapshot: %v, want NotFound", err)
	}
}

// testStorage: with Capabilities.Storage a sandbox made with
// Harness.StorageMB that writes past it gets ENOSPC, and carries on once
// it frees the space; the disk is its own, not the host's to fill.
func testStorage(t *testing.T, h Harness) {
	p := open(t, h)
	if !p.Capabilities().Storage {
		t.Skip("the provider enforces no disk limit (Capabilities.Storage)")
	}
	if h.StorageMB == 0 {
		t.Skip("the harness sets no StorageMB: its backend records the size without a disk to fill")
	}
	sb := create(t, h, p, func(s *sandbox.Spec) { s.Resources.StorageMB = h.StorageMB })
	ctx := testContext(t)
	dir := workDir(t, ctx, sb)
	res := run(t, ctx, sb, sandbox.Command{Args: sh(fmt.Sprintf("dd if=/dev/zero of=%s/fill bs=1M count=%d", dir, h.StorageMB+16))})
	if res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "No space left on device") {
		t.Fatalf("%d MB written under a %d MB limit: exit %d, %s", h.StorageMB+16, h.StorageMB, res.ExitCode, res.Stderr)
	}
	res = run(t, ctx, sb, sandbox.Command{Args: sh(fmt.Sprintf("rm %s/fill && echo after > %s/small && cat %s/small", dir, dir, dir))})
	if res.ExitCode != 0 || string(res.Stdout) != "after\n" {
		t.Fatalf("a write after freeing the space: exit %d, %q %s", res.ExitCode, res.Stdout, res.Stderr)
	}
}
