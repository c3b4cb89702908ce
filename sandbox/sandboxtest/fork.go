package sandboxtest

import (
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
