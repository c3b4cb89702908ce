package daytona_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/providers/daytona"
	"github.com/berth-sh/berth/providers/daytona/daytonatest"
	"github.com/berth-sh/berth/sandbox"
)

// autoStop sets a sandbox's auto-stop interval through the fake's API, as
// a user of Daytona's console would.
func autoStop(t *testing.T, srv *daytonatest.Server, id, minutes string) {
	t.Helper()
	req, _ := http.NewRequest("POST", srv.URL()+"/sandbox/"+id+"/autostop/"+minutes, nil)
	req.Header.Set("Authorization", "Bearer "+srv.APIKey())
	res, err := srv.Client().Do(req)
	if err != nil || res.StatusCode/100 != 2 {
		t.Fatalf("set auto-stop: %v %v", res, err)
	}
	res.Body.Close()
}

func state(t *testing.T, p *sandbox.Provider, id string) string {
	t.Helper()
	infos, err := p.List(context.Background(), map[string]string{"ports": "1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		if in.ID == id {
			return in.State
		}
	}
	return "gone"
}

// Preview traffic does not count as activity: a sandbox with auto-stop
// whose endpoint is in use stays started because the handle refreshes its
// activity, while one without stops; once the handle is closed, the
// refreshes end and it stops too. The endpoint is a signed preview URL
// that stops working at its expiry.
func TestEndpointKeepsActive(t *testing.T) {
	needCommands(t)
	const minute = 250 * time.Millisecond
	srv := newServer(t, daytonatest.Options{Minute: minute})
	d := openDriver(t, srv, func(o *daytona.Options) { o.KeepActive = minute / 10; o.PreviewTTL = 3 * time.Second })
	p := sandbox.NewProvider("daytona", d)
	ctx := t.Context()
	newSandbox := func() *sandbox.Sandbox {
		sb, err := p.Create(ctx, sandbox.Spec{Image: "busybox:1.36", Labels: map[string]string{"ports": "1"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sb.Delete(context.Background()); sb.Close() })
		return sb
	}
	used, idle := newSandbox(), newSandbox()
	asked := time.Now()
	autoStop(t, srv, idle.ID(), "1")
	autoStop(t, srv, used.ID(), "1")
	ep, err := used.Endpoint(ctx, sandbox.Port{Number: 8000})
	if err != nil {
		t.Fatal(err)
	}
	if len(ep.Headers) != 0 || ep.Expires.Before(asked.Add(time.Second)) || ep.Expires.After(asked.Add(3*time.Second)) {
		t.Fatalf("endpoint %v: want a signed URL (no headers) expiring within the preview TTL", ep)
	}
	time.Sleep(6 * minute)
	if s := state(t, p, idle.ID()); s != "stopped" {
		t.Fatalf("control: the idle sandbox is %s after 6 auto-stop minutes", s)
	}
	if s := state(t, p, used.ID()); s != "started" {
		t.Fatalf("the sandbox whose endpoint is in use is %s", s)
	}
	// Past its expiry the signed URL is refused.
	time.Sleep(time.Until(ep.Expires.Add(time.Second)))
	res, err := http.Get(ep.Join("/"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("an expired signed preview URL: %d", res.StatusCode)
	}
	if err := used.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for state(t, p, used.ID()) == "started" {
		if time.Now().After(deadline) {
			t.Fatal("the sandbox is still started long after its handle closed")
		}
		time.Sleep(minute)
	}
	if _, err := idle.Endpoint(ctx, sandbox.Port{Number: 8765, Protocol: sandbox.PortTCP}); sandbox.ClassOf(err) != sandbox.NotSupported || !strings.Contains(err.Error(), "http") {
		t.Fatalf("a tcp endpoint on Daytona: %v, want NotSupported", err)
	}
}
