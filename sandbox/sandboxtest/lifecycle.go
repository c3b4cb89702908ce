package sandboxtest

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/sandbox"
)

var lifecycleCases = []testCase{
	{name: "delete-twice", run: testDeleteTwice},
	{name: "close-twice", run: testCloseTwice},
	{name: "calls-after-close", run: testCallsAfterClose},
	{name: "connect-fresh-provider", run: testConnect},
	{name: "connect-unknown", run: testConnectUnknown},
	{name: "list-by-labels", run: testList},
	{name: "set-timeout-expires", run: testSetTimeout},
	{name: "optional-features", run: testOptionalFeatures},
	{name: "fork", run: testFork},
	{name: "snapshot-restore", run: testSnapshot},
	{name: "storage-limit", run: testStorage},
	{name: "invalid-spec", run: testInvalidSpec},
	{name: "unsupported-network", run: testUnsupportedNetwork},
}

func testDeleteTwice(t *testing.T, h Harness) {
	ctx, p, sb := fresh(t, h)
	if err := sb.Delete(ctx); err != nil {
		t.Fatalf("first delete: %v", err)
	}
	wantClass(t, "second delete", sb.Delete(ctx), sandbox.NotFound)
	wantClass(t, "delete by id after delete", p.Delete(ctx, sb.ID()), sandbox.NotFound)
	_, err := p.Connect(ctx, sb.ID())
	wantClass(t, "connect after delete", err, sandbox.NotFound)
}

func testCloseTwice(t *testing.T, h Harness) {
	ctx, p, sb := fresh(t, h)
	if err := sb.Close(); err != nil {
		t.Fatalf("first close: %v", err)
	}
	if err := sb.Close(); err != nil {
		t.Errorf("second close: %v, want nil", err)
	}
	// Close released the handle only: the sandbox is still there.
	again, err := p.Connect(ctx, sb.ID())
	if err != nil {
		t.Fatalf("connect after close: %v", err)
	}
	defer again.Close()
	if res := run(t, ctx, again, sandbox.Command{Args: sh("printf alive")}); string(res.Stdout) != "alive" {
		t.Errorf("sandbox after its handle closed: %q", res.Stdout)
	}
}

func testCallsAfterClose(t *testing.T, h Harness) {
	ctx, _, sb := fresh(t, h)
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}})
	wantClass(t, "exec after close", err, sandbox.InvalidArgument)
	_, err = sb.ReadFile(ctx, "/etc/hostname")
	wantClass(t, "read after close", err, sandbox.InvalidArgument)
	wantClass(t, "write after close", sb.WriteFile(ctx, "/tmp/x", nil, 0), sandbox.InvalidArgument)
	_, err = sb.ListDir(ctx, "/")
	wantClass(t, "list after close", err, sandbox.InvalidArgument)
	wantClass(t, "set timeout after close", sb.SetTimeout(ctx, time.Minute), sandbox.InvalidArgument)
	wantClass(t, "delete after close", sb.Delete(ctx), sandbox.InvalidArgument)
	wantClass(t, "upload after close", sb.Upload(ctx, "/tmp", bytes.NewReader(nil)), sandbox.InvalidArgument)
	_, err = sb.Download(ctx, "/tmp")
	wantClass(t, "download after close", err, sandbox.InvalidArgument)
}

func testConnect(t *testing.T, h Harness) {
	ctx, _, sb := fresh(t, h)
	dir := workDir(t, ctx, sb)
	data := []byte("written through the first provider value " + randomHex(4))
	if err := sb.WriteFile(ctx, dir+"/shared.txt", data, 0o644); err != nil {
		t.Fatal(err)
	}
	other := open(t, h)
	sb2, err := other.Connect(ctx, sb.ID())
	if err != nil {
		t.Fatalf("connect from a fresh provider value: %v", err)
	}
	defer sb2.Close()
	if sb2.ID() != sb.ID() {
		t.Errorf("connected id %q, want %q", sb2.ID(), sb.ID())
	}
	got, err := sb2.ReadFile(ctx, dir+"/shared.txt")
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("read through the connected handle: %q, %v; want %q", got, err, data)
	}
	res := run(t, ctx, sb2, sandbox.Command{Args: []string{"cat", "shared.txt"}, Dir: dir})
	if !bytes.Equal(res.Stdout, data) {
		t.Errorf("cat through the connected handle: %q", res.Stdout)
	}
}

func testConnectUnknown(t *testing.T, h Harness) {
	p := open(t, h)
	_, err := p.Connect(testContext(t), "berth-suite-no-such-sandbox")
	wantClass(t, "connect to an unknown id", err, sandbox.NotFound)
}

func testList(t *testing.T, h Harness) {
	p := open(t, h)
	ctx := testContext(t)
	mine, other := randomHex(6), randomHex(6)
	sb := create(t, h, p, func(s *sandbox.Spec) { s.Labels["berth-suite-run"] = mine })
	create(t, h, p, func(s *sandbox.Spec) { s.Labels["berth-suite-run"] = other })
	sel := map[string]string{"berth-suite-run": mine}
	infos, err := open(t, h).List(ctx, sel)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(infos) != 1 || infos[0].ID != sb.ID() {
		t.Fatalf("list by label = %v, want exactly %s", ids(infos), sb.ID())
	}
	if infos[0].Labels["berth-suite-run"] != mine || infos[0].Provider != p.Name() {
		t.Errorf("listed info = %+v, want the label and provider %q", infos[0], p.Name())
	}
	if err := sb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	infos, err = p.List(ctx, sel)
	if err != nil || len(infos) != 0 {
		t.Errorf("list after delete = %v, %v; want none", ids(infos), err)
	}
}

func ids(infos []sandbox.Info) string {
	var s []string
	for _, i := range infos {
		s = append(s, i.ID)
	}
	return "[" + strings.Join(s, " ") + "]"
}

// testSetTimeout shortens a sandbox's life to 2s and waits for it to go.
// testSetTimeout: with Capabilities.SetTimeout a sandbox is gone soon after
// the deadline SetTimeout set; without it SetTimeout is NotSupported and
// the sandbox lives on.
func testSetTimeout(t *testing.T, h Harness) {
	ctx, p, sb := fresh(t, h)
	const life = 2 * time.Second
	caps := p.Capabilities()
	if !caps.SetTimeout {
		wantClass(t, "set timeout without Capabilities.SetTimeout", sb.SetTimeout(ctx, life), sandbox.NotSupported)
		if res := run(t, ctx, sb, sandbox.Command{Args: sh("printf alive")}); string(res.Stdout) != "alive" {
			t.Fatalf("sandbox after a refused SetTimeout: %q", res.Stdout)
		}
		return
	}
	if caps.MinTimeout > life {
		// The capability says the deadline cannot be this short; waiting
		// for a longer one is the provider's own test's job.
		t.Skipf("the provider's shortest timeout is %v (Capabilities.MinTimeout); this case needs %v", caps.MinTimeout, life)
	}
	// The provider's deadline is at least this: it was set after now.
	deadline := time.Now().Add(life)
	if err := sb.SetTimeout(ctx, life); err != nil {
		t.Fatalf("set timeout: %v", err)
	}
	if res := run(t, ctx, sb, sandbox.Command{Args: sh("printf alive")}); string(res.Stdout) != "alive" {
		t.Fatalf("sandbox right after SetTimeout: %q", res.Stdout)
	}
	for {
		_, err := p.Connect(ctx, sb.ID())
		if sandbox.ClassOf(err) == sandbox.NotFound {
			if time.Now().Before(deadline) {
				t.Fatalf("sandbox gone before its deadline")
			}
			return
		}
		if err != nil {
			t.Fatalf("connect while waiting for expiry: %v", err)
		}
		if time.Now().After(deadline.Add(h.ExpiryGrace)) {
			t.Fatalf("sandbox still there %v after its deadline", h.ExpiryGrace)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func testInvalidSpec(t *testing.T, h Harness) {
	p := open(t, h)
	spec := h.Spec()
	spec.Image, spec.Build = "", nil
	_, err := p.Create(testContext(t), spec)
	wantClass(t, "create without an image", err, sandbox.InvalidArgument)
	spec = h.Spec()
	spec.TTL = -time.Second
	_, err = p.Create(testContext(t), spec)
	wantClass(t, "create with a negative ttl", err, sandbox.InvalidArgument)
}

func testUnsupportedNetwork(t *testing.T, h Harness) {
	p := open(t, h)
	if p.Capabilities().Supports(sandbox.NetworkPublic) {
		t.Skip("provider supports public networks; nothing to refuse")
	}
	spec := h.Spec()
	spec.Network = sandbox.Network{Mode: sandbox.NetworkPublic}
	_, err := p.Create(context.WithoutCancel(testContext(t)), spec)
	wantClass(t, "create with an unsupported network", err, sandbox.NotSupported)
}

// testOptionalFeatures: every feature a provider does not claim is
// refused as NotSupported, never half done; what it claims answers.
func testOptionalFeatures(t *testing.T, h Harness) {
	ctx, p, sb := fresh(t, h)
	caps := p.Capabilities()
	if !caps.Pause {
		wantClass(t, "pause without Capabilities.Pause", sb.Pause(ctx), sandbox.NotSupported)
		wantClass(t, "resume without Capabilities.Pause", sb.Resume(ctx), sandbox.NotSupported)
	}
	if !caps.Snapshot {
		_, err := sb.Snapshot(ctx)
		wantClass(t, "snapshot without Capabilities.Snapshot", err, sandbox.NotSupported)
	}
	_, err := sb.EnvdEndpoint(ctx)
	if caps.Envd && err != nil {
		t.Errorf("envd endpoint with Capabilities.Envd: %v", err)
	}
	if !caps.Envd {
		wantClass(t, "envd endpoint without Capabilities.Envd", err, sandbox.NotSupported)
	}
}
