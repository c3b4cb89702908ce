package daytona_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/providers/daytona"
	"github.com/berth-sh/berth/providers/daytona/daytonatest"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// vmSnapshot is a snapshot whose sandboxes are of the linux-vm class in
// the fake, as a snapshot built for that class is on Daytona.
const vmSnapshot = "berth-vm"

func vmServer(t *testing.T) *daytonatest.Server {
	t.Helper()
	return newServer(t, daytonatest.Options{SnapshotClasses: map[string]string{vmSnapshot: "linux-vm"}})
}

// TestCapabilitiesFollowTheCalls: the driver claims what its handles do.
func TestCapabilitiesFollowTheCalls(t *testing.T) {
	c := daytona.Capabilities()
	if !c.Pause || !c.Fork || !c.SetTimeout || !c.Signal || c.Snapshot {
		t.Fatalf("capabilities %+v: want pause, fork, set-timeout and signal, no snapshot", c)
	}
	if !c.Supports(driver.NetworkAllowlist) {
		t.Fatal("the allowlist network mode is not claimed")
	}
}

// TestPauseKeepsProcesses: a VM sandbox pauses and resumes with a running
// command kept where it was: it neither ran on while paused nor died.
func TestPauseKeepsProcesses(t *testing.T) {
	needCommands(t)
	srv := vmServer(t)
	p := sandbox.NewProvider("daytona", openDriver(t, srv, nil))
	ctx := t.Context()
	sb, err := p.Create(ctx, sandbox.Spec{Image: daytona.SnapshotPrefix + vmSnapshot})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	defer sb.Delete(context.WithoutCancel(ctx))
	// A counter that ticks every 50 ms, and says where it stopped.
	var out bytes.Buffer
	proc, err := sb.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", "i=0; while [ $i -lt 1000 ]; do i=$((i+1)); echo $i > /tmp/count; sleep 0.05; done"}, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := sb.Pause(ctx); err != nil {
		t.Fatalf("pause: %v", err)
	}
	if st := srv.State(sb.ID()); st != "paused" {
		t.Fatalf("state after pause: %s", st)
	}
	before := readCount(t, srv, sb.ID())
	time.Sleep(400 * time.Millisecond)
	if after := readCount(t, srv, sb.ID()); after != before {
		t.Fatalf("the counter ran on while paused: %s then %s", before, after)
	}
	if err := sb.Resume(ctx); err != nil {
		t.Fatalf("resume: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for readCount(t, srv, sb.ID()) == before {
		if time.Now().After(deadline) {
			t.Fatal("the counter did not go on after resume")
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = proc
}

// readCount reads /tmp/count from the fake's file system for the sandbox.
func readCount(t *testing.T, srv *daytonatest.Server, id string) string {
	t.Helper()
	b, err := srv.ReadFile(id, "/tmp/count")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestForkCopiesTheFileSystem: a fork holds the files written before it
// and goes its own way after; the source runs on and can be deleted once
// its fork is.
func TestForkCopiesTheFileSystem(t *testing.T) {
	needCommands(t)
	srv := vmServer(t)
	p := sandbox.NewProvider("daytona", openDriver(t, srv, nil))
	ctx := t.Context()
	src, err := p.Create(ctx, sandbox.Spec{Image: daytona.SnapshotPrefix + vmSnapshot, Labels: map[string]string{"job": "fork"}})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	defer src.Delete(context.WithoutCancel(ctx))
	if err := src.WriteFile(ctx, "/work/state.txt", []byte("before"), 0o600); err != nil {
		t.Fatal(err)
	}
	fork, err := src.Fork(ctx)
	if err != nil {
		t.Fatalf("fork: %v", err)
	}
	defer fork.Close()
	if fork.ID() == src.ID() {
		t.Fatal("the fork has the source's ID")
	}
	if got, err := fork.ReadFile(ctx, "/work/state.txt"); err != nil || string(got) != "before" {
		t.Fatalf("the fork's copy: %q %v", got, err)
	}
	if err := fork.WriteFile(ctx, "/work/state.txt", []byte("fork"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _ := src.ReadFile(ctx, "/work/state.txt"); string(got) != "before" {
		t.Fatalf("a write in the fork reached the source: %q", got)
	}
	if res, err := src.Run(ctx, sandbox.Command{Args: []string{"sh", "-c", "printf ok"}}); err != nil || string(res.Stdout) != "ok" {
		t.Fatalf("the source after the fork: %q %v", res.Stdout, err)
	}
	if err := fork.Delete(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestContainersCannotPauseOrFork: Daytona refuses both for a container
// sandbox (422), which the driver reports as NotSupported, the sandbox
// untouched.
func TestContainersCannotPauseOrFork(t *testing.T) {
	needCommands(t)
	_, _, sb := openSandbox(t, daytonatest.Options{})
	ctx := t.Context()
	if err := sb.Pause(ctx); !errors.Is(err, errdefs.ErrNotSupported) || !strings.Contains(err.Error(), "VM class") {
		t.Fatalf("pause of a container: %v, want NotSupported", err)
	}
	if _, err := sb.Fork(ctx); !errors.Is(err, errdefs.ErrNotSupported) || errdefs.ClassOf(err) != errdefs.NotSupported {
		t.Fatalf("fork of a container: %v (class %v), want NotSupported", err, errdefs.ClassOf(err))
	}
	if res, err := sb.Run(ctx, sandbox.Command{Args: []string{"sh", "-c", "printf alive"}}); err != nil || string(res.Stdout) != "alive" {
		t.Fatalf("the sandbox after the refusals: %q %v", res.Stdout, err)
	}
}
