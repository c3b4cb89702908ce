package modal_test

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"go.uber.org/goleak"

	"github.com/berth-sh/berth/providers/modal"
	"github.com/berth-sh/berth/providers/modal/modaltest"
	"github.com/berth-sh/berth/sandbox"
)

// An allowlist reaches Modal as the SDK's outbound allowlists: CIDRs (a
// bare address as a /32) and domains, in allowlist mode; an entry that is
// neither is refused before anything is sent.
func TestAllowlistReachesModal(t *testing.T) {
	srv := serve(t)
	p := sandbox.NewProvider("modal", openDriver(t, srv, nil))
	defer p.Close()
	ctx := t.Context()
	if !p.Capabilities().Supports(sandbox.NetworkAllowlist) {
		t.Fatal("the allowlist network mode is not claimed")
	}
	sb, err := p.Create(ctx, sandbox.Spec{Image: testImage, Network: sandbox.Network{
		Mode: sandbox.NetworkAllowlist, Allow: []string{"10.0.0.0/8", "1.2.3.4", "PyPI.org", "*.example.com"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Delete(ctx)
	defer sb.Close()
	st, _ := srv.Sandbox(sb.ID())
	na := st.Definition.GetNetworkAccess()
	if na.GetNetworkAccessType() != pb.NetworkAccess_ALLOWLIST ||
		!slices.Equal(na.GetAllowedCidrs(), []string{"10.0.0.0/8", "1.2.3.4/32"}) ||
		!slices.Equal(na.GetAllowedDomains(), []string{"pypi.org", "*.example.com"}) {
		t.Fatalf("network access %v %v %v", na.GetNetworkAccessType(), na.GetAllowedCidrs(), na.GetAllowedDomains())
	}
	// Domains only: the CIDR list is sent empty, which allows no address.
	sb2, err := p.Create(ctx, sandbox.Spec{Image: testImage, Network: sandbox.Network{Mode: sandbox.NetworkAllowlist, Allow: []string{"pypi.org"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb2.Delete(ctx)
	defer sb2.Close()
	st, _ = srv.Sandbox(sb2.ID())
	if na := st.Definition.GetNetworkAccess(); na.GetNetworkAccessType() != pb.NetworkAccess_ALLOWLIST || len(na.GetAllowedCidrs()) != 0 {
		t.Fatalf("domains only: %v %v", na.GetNetworkAccessType(), na.GetAllowedCidrs())
	}
	before := len(srv.Calls("SandboxCreateV2"))
	for _, bad := range []string{"10.0.0.0/33", "exa mple.com", "-bad-.com"} {
		_, err := p.Create(ctx, sandbox.Spec{Image: testImage, Network: sandbox.Network{Mode: sandbox.NetworkAllowlist, Allow: []string{bad}}})
		if sandbox.ClassOf(err) != sandbox.InvalidArgument {
			t.Errorf("allowlist %q: %v, want InvalidArgument", bad, err)
		}
	}
	if n := len(srv.Calls("SandboxCreateV2")); n != before {
		t.Errorf("%d creates were sent for refused allowlists", n-before)
	}
}

// TestSnapshotRestore: a file written before the snapshot is in a sandbox
// made from it, after the original is gone; an image ID Modal does not
// know is NotFound.
func TestSnapshotRestore(t *testing.T) {
	srv := serve(t)
	p := sandbox.NewProvider("modal", openDriver(t, srv, nil))
	defer p.Close()
	ctx := t.Context()
	if !p.Capabilities().Snapshot {
		t.Fatal("Capabilities.Snapshot is not claimed")
	}
	sb, err := p.Create(ctx, sandbox.Spec{Image: testImage})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if err := sb.WriteFile(ctx, "/work/state/kept.txt", []byte("before the snapshot\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	img, err := sb.Snapshot(ctx)
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if !strings.HasPrefix(img, modal.ImagePrefix+"im-") {
		t.Fatalf("snapshot reference %q", img)
	}
	// What the original does after the snapshot is not in it.
	if err := sb.WriteFile(ctx, "/work/state/later.txt", []byte("after"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := sb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	restored, err := p.Create(ctx, sandbox.Spec{Image: img})
	if err != nil {
		t.Fatalf("create from the snapshot: %v", err)
	}
	defer restored.Delete(ctx)
	defer restored.Close()
	got, err := restored.ReadFile(ctx, "/work/state/kept.txt")
	if err != nil || string(got) != "before the snapshot\n" {
		t.Fatalf("the file written before the snapshot: %q %v", got, err)
	}
	if fi, err := restored.Stat(ctx, "/work/state/kept.txt"); err != nil || fi.Mode != 0o600 {
		t.Errorf("its mode: %+v %v", fi, err)
	}
	if _, err := restored.Stat(ctx, "/work/state/later.txt"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("a file written after the snapshot: %v, want NotFound", err)
	}
	_, err = p.Create(ctx, sandbox.Spec{Image: modal.ImagePrefix + "im-unknown0000000000000000"})
	if sandbox.ClassOf(err) != sandbox.NotFound {
		t.Errorf("create from an unknown image: %v, want NotFound", err)
	}
	_, err = p.Create(ctx, sandbox.Spec{Image: modal.ImagePrefix + "../../etc"})
	if sandbox.ClassOf(err) != sandbox.InvalidArgument {
		t.Errorf("create from a malformed image ID: %v, want InvalidArgument", err)
	}
}

// TestStdinLeavesNothingBehind is the regression test of a leak seen
// under load: the SDK writes stdin on a background context and retries a
// transient failure for about ten seconds, so a stdin call still going
// when the provider and its server close outlives them. The goroutine
// check at the end would see it. Stdin here delivers late, and the
// router's stdin calls fail as an unreachable worker's do.
func TestStdinLeavesNothingBehind(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		// outage is how many stdin calls fail UNAVAILABLE.
		outage int
		// exited: stdin delivers after the process has ended.
		exited bool
	}{
		{name: "after the process ended", args: []string{"true"}, outage: 1000, exited: true},
		{name: "in flight at close", args: []string{"cat"}, outage: 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			srv, err := modaltest.Start(modaltest.Options{})
			if err != nil {
				t.Fatal(err)
			}
			serveAt(t, srv)
			p := sandbox.NewProvider("modal", openDriver(t, srv, nil))
			ctx := t.Context()
			sb, err := p.Create(ctx, sandbox.Spec{Image: testImage})
			if err != nil {
				t.Fatal(err)
			}
			srv.Unavailable("TaskExecStdinWrite", c.outage)
			release := make(chan struct{})
			proc, err := sb.Exec(ctx, sandbox.Command{Args: c.args, Stdin: &lateReader{release: release}})
			if err != nil {
				t.Fatal(err)
			}
			if c.exited {
				if code, err := proc.Wait(ctx); err != nil || code != 0 {
					t.Fatalf("%v: %d %v", c.args, code, err)
				}
			}
			close(release)
			// Give the stdin copy the moment it needs to start its call; a
			// driver that makes none shows nothing here.
			for deadline := time.Now().Add(500 * time.Millisecond); len(srv.Calls("TaskExecStdinWrite")) == 0 && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
			if err := sb.Close(); err != nil {
				t.Fatal(err)
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			if err := srv.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// lateReader blocks until release, then gives one line and EOF.
type lateReader struct {
	release chan struct{}
	done    bool
}

func (r *lateReader) Read(b []byte) (int, error) {
	if r.done {
		return 0, io.EOF
	}
	<-r.release
	r.done = true
	return copy(b, "late\n"), nil
}
