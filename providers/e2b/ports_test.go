package e2b_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/providers/e2b"
	"github.com/berth-sh/berth/sandbox"
)

// An endpoint is https://<port>-<id>.<domain> without E2B_SANDBOX_URL, and
// that URL with the routing headers behind it; the driver creates
// sandboxes whose ports are private, and the endpoint carries their
// traffic token. A handle made by Connect learns the token from one
// connect call that asks for no more life than the sandbox has.
func TestEndpoint(t *testing.T) {
	t.Parallel()
	f := newFake(t, fakeOptions{domain: "sandboxes.test"})
	ctx := testCtx(t)
	p := openProvider(t, f, nil)
	sb, err := p.Create(ctx, sandbox.Spec{Image: "base", TTL: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Delete(ctx)
	defer sb.Close()
	f.mu.Lock()
	traffic := f.sandbox(sb.ID()).traffic
	f.mu.Unlock()
	if traffic == "" {
		t.Fatal("the driver created a sandbox with public ports")
	}
	ep, err := sb.Endpoint(ctx, sandbox.Port{Number: 8000})
	if err != nil {
		t.Fatal(err)
	}
	if ep.URL != f.data.URL || ep.Headers["E2b-Sandbox-Id"] != sb.ID() || ep.Headers["E2b-Sandbox-Port"] != "8000" || ep.Headers["e2b-traffic-access-token"] != traffic || !ep.Expires.IsZero() {
		t.Fatalf("endpoint behind E2B_SANDBOX_URL: %+v", ep)
	}
	if strings.Contains(ep.String(), traffic) {
		t.Fatalf("the endpoint's String shows the traffic token: %s", ep)
	}
	// Without the token the fake's edge refuses, as E2B's does.
	req, _ := http.NewRequestWithContext(ctx, "GET", ep.URL, nil)
	req.Header.Set("E2b-Sandbox-Id", sb.ID())
	req.Header.Set("E2b-Sandbox-Port", "8000")
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusForbidden {
		t.Fatalf("without the token: %v %v", res, err)
	}

	byDomain := openProvider(t, f, func(o *e2b.Options) { o.SandboxURL = "" })
	conn, err := byDomain.Connect(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	before := f.callsOf("POST /sandboxes/" + sb.ID() + "/connect")
	f.mu.Lock()
	end := f.eng.Lookup(sb.ID()).Deadline()
	f.mu.Unlock()
	ep, err = conn.Endpoint(ctx, sandbox.Port{Number: 3000})
	if err != nil {
		t.Fatal(err)
	}
	if ep.URL != "https://3000-"+sb.ID()+".sandboxes.test" || ep.Headers["e2b-traffic-access-token"] != traffic || ep.Headers["E2b-Sandbox-Id"] != "" {
		t.Fatalf("endpoint by domain: %+v", ep)
	}
	if _, err := conn.Endpoint(ctx, sandbox.Port{Number: 3001}); err != nil {
		t.Fatal(err)
	}
	if n := f.callsOf("POST /sandboxes/"+sb.ID()+"/connect") + f.callsOf("POST /v2/sandboxes/"+sb.ID()+"/connect") - before; n != 1 {
		t.Fatalf("%d connect calls for the traffic token, want 1", n)
	}
	f.mu.Lock()
	moved := f.eng.Lookup(sb.ID()).Deadline().Sub(end)
	f.mu.Unlock()
	if moved > 2*time.Second {
		t.Fatalf("learning the traffic token moved the deadline %v later", moved)
	}
	if _, err := conn.Endpoint(ctx, sandbox.Port{Number: 3000, Protocol: sandbox.PortTCP}); sandbox.ClassOf(err) != sandbox.NotSupported {
		t.Fatalf("a tcp endpoint on E2B: %v, want NotSupported", err)
	}
}
