package osbserve

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/serve/internal/core"
	"github.com/berth-sh/berth/serve/internal/servetest"
	"github.com/berth-sh/berth/serve/opensandbox"
)

// gated holds every Create until open is closed (or its ctx ends), and can
// fail them: a provider whose creates take as long as an image pull.
type gated struct {
	driver.Provider
	open chan struct{}
	fail error
}

func (g *gated) Create(ctx context.Context, spec driver.Spec) (driver.Sandbox, error) {
	select {
	case <-g.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if g.fail != nil {
		return nil, g.fail
	}
	return g.Provider.Create(ctx, spec)
}

func newGatedEnv(t *testing.T, fail error) (*testEnv, *gated) {
	t.Helper()
	return newGatedEnvWith(t, fail, nil)
}

// newGatedEnvWith is newGatedEnv with options.
func newGatedEnvWith(t *testing.T, fail error, mutate func(*core.Options)) (*testEnv, *gated) {
	t.Helper()
	g := &gated{open: make(chan struct{}), fail: fail}
	e := newEnv(t, mutate, func(d driver.Provider) driver.Provider { g.Provider = d; return g })
	e.osb.readyWait = 200 * time.Millisecond
	return e, g
}

// TestOpenSandboxPendingCreate: a create slower than the wait answers 202
// Pending; GET says Pending, a proxied ping is 503 with Retry-After until
// the provider is done, then the sandbox is Running and execd answers.
func TestOpenSandboxPendingCreate(t *testing.T) {
	e, g := newGatedEnv(t, nil)
	sb := e.OSBCreate(testKey, servetest.OSBImageBody(nil))
	if sb.Status.State != opensandbox.StatePending {
		t.Fatalf("create answered %+v, want Pending", sb.Status)
	}
	var got opensandbox.Sandbox
	e.OSBCall("GET", "/v1/sandboxes/"+sb.ID, testKey, nil, nil).JSON(t, &got)
	if got.Status.State != opensandbox.StatePending {
		t.Fatalf("GET: %+v", got.Status)
	}
	// The endpoint is known before the sandbox runs, as upstream's is.
	base, hdr := e.OSBEndpoint(testKey, sb.ID, opensandbox.ExecdPort)
	if r := e.Execd("GET", base, hdr, "", "/ping", nil); r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
		t.Fatalf("ping while pending: %d %v %s", r.Status, r.Header, r.Body)
	}
	close(g.open)
	eventually(t, "Running", func() bool {
		e.OSBCall("GET", "/v1/sandboxes/"+sb.ID, testKey, nil, nil).JSON(t, &got)
		return got.Status.State == opensandbox.StateRunning
	})
	if r := e.Execd("GET", base, hdr, "", "/ping", nil); r.Status != http.StatusOK {
		t.Fatalf("ping once running: %d %s", r.Status, r.Body)
	}
}

// TestOpenSandboxDeleteWhilePending: a sandbox deleted while its create is
// in flight never goes live, what the provider made is deleted, and its
// slot is given back (after the delete: the key never holds more than its
// maximum): a key allowed one sandbox can create one again.
func TestOpenSandboxDeleteWhilePending(t *testing.T) {
	e, g := newGatedEnvWith(t, nil, func(o *core.Options) { o.MaxSandboxesPerKey = 1 })
	sb := e.OSBCreate(testKey, servetest.OSBImageBody(nil))
	if r := e.OSBCall("DELETE", "/v1/sandboxes/"+sb.ID, testKey, nil, nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete while pending: %d %s", r.Status, r.Body)
	}
	close(g.open)
	if r := e.OSBCall("GET", "/v1/sandboxes/"+sb.ID, testKey, nil, nil); r.Status != http.StatusNotFound {
		t.Fatalf("GET after delete: %d %s", r.Status, r.Body)
	}
	eventually(t, "nothing left", func() bool {
		infos, err := e.P.List(context.Background(), nil)
		return err == nil && len(infos) == 0 && e.C.Live() == 0
	})
	eventually(t, "the slot free", func() bool {
		return e.OSBCall("POST", "/v1/sandboxes", testKey, servetest.OSBImageBody(nil), nil).Status == http.StatusAccepted
	})
}

// TestOpenSandboxFailedCreate: a create the provider refuses leaves the
// sandbox Failed with the reason, its proxy 502, and DELETE forgets it.
func TestOpenSandboxFailedCreate(t *testing.T) {
	e, g := newGatedEnv(t, sandbox.Errorf(sandbox.ResourceExhausted, "no capacity for image"))
	close(g.open)
	sb := e.OSBCreate(testKey, servetest.OSBImageBody(nil))
	var got opensandbox.Sandbox
	eventually(t, "Failed", func() bool {
		e.OSBCall("GET", "/v1/sandboxes/"+sb.ID, testKey, nil, nil).JSON(t, &got)
		return got.Status.State == opensandbox.StateFailed
	})
	if !strings.Contains(got.Status.Message, "no capacity for image") || got.Status.Reason != "provision_failed" {
		t.Fatalf("failed status: %+v", got.Status)
	}
	base, hdr := e.OSBEndpoint(testKey, sb.ID, opensandbox.ExecdPort)
	if r := e.Execd("GET", base, hdr, "", "/ping", nil); r.Status != http.StatusBadGateway || !strings.Contains(string(r.Body), "no capacity") {
		t.Fatalf("ping of a failed sandbox: %d %s", r.Status, r.Body)
	}
	if r := e.OSBCall("DELETE", "/v1/sandboxes/"+sb.ID, testKey, nil, nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete of a failed sandbox: %d %s", r.Status, r.Body)
	}
	if r := e.OSBCall("GET", "/v1/sandboxes/"+sb.ID, testKey, nil, nil); r.Status != http.StatusNotFound {
		t.Fatalf("GET after delete: %d %s", r.Status, r.Body)
	}
}

// TestOpenSandboxCloseDuringCreate: stopping the server while a create is
// in flight stops it; nothing is left (TestMain's leak check covers the
// goroutines).
func TestOpenSandboxCloseDuringCreate(t *testing.T) {
	e, _ := newGatedEnv(t, nil)
	e.OSBCreate(testKey, servetest.OSBImageBody(nil))
	e.Close()
	if infos, err := e.P.List(context.Background(), nil); err != nil || len(infos) != 0 {
		t.Fatalf("left after Close: %+v %v", infos, err)
	}
}

// TestOpenSandboxCreateMapping: what a create asks for reaches the provider
// as a spec: resourceLimits in Kubernetes forms as limits, metadata as
// labels with the server's own, env, timeout as TTL (and as the server's
// own timer), the network from the egress policy; unknown fields are
// accepted; what berth cannot honour is refused by name.
func TestOpenSandboxCreateMapping(t *testing.T) {
	p, rec := servetest.HostFake(t)
	e := newEnvOver(t, p, "host", func(o *core.Options) { o.OpenSandbox.Images = []string{"registry.example/"} })
	sb := e.OSBCreate(testKey, map[string]any{
		"image":           map[string]any{"uri": "registry.example/swe:1"},
		"entrypoint":      []string{"tail", "-f", "/dev/null"},
		"timeout":         90,
		"resourceLimits":  map[string]string{"cpu": "2", "memory": "8192Mi", "ephemeral-storage": "20Gi", "gpu_type": "none"},
		"metadata":        map[string]string{"team": "rl", "nemo-gym.nvidia.com/run": "r1"},
		"env":             map[string]string{"A": "1"},
		"networkPolicy":   map[string]any{"defaultAction": "deny"},
		"credentialProxy": map[string]any{"enabled": false},
		"someFutureField": []int{1, 2},
	})
	specs := rec.Specs()
	spec := specs[len(specs)-1]
	r := spec.Resources
	if spec.Image != "registry.example/swe:1" || r.CPUs != 2 || r.MemoryMB != 8192 || r.StorageMB != 20480 || !r.Limits || r.PIDs != core.DefaultResources.PIDs ||
		spec.TTL != 90*time.Second || spec.Env["A"] != "1" || spec.Network.Mode != sandbox.NetworkNone ||
		spec.Labels["team"] != "rl" || spec.Labels["nemo-gym.nvidia.com/run"] != "r1" || spec.Labels[core.IDLabel] != sb.ID || spec.Labels[core.LauncherLabel] != core.LauncherValue {
		t.Fatalf("spec: %+v", spec)
	}
	if d := time.Until(e.C.Get(sb.ID).Deadline()); d < 85*time.Second || d > 90*time.Second {
		t.Fatalf("the server's timer ends the sandbox in %v, want 90 s", d)
	}
	for _, c := range []struct {
		name   string
		body   map[string]any
		status int
		want   string
	}{
		{"an image the server does not allow", map[string]any{"image": map[string]any{"uri": "docker.io/evil:1"}}, 400, "not served here"},
		{"a template's name", map[string]any{"image": map[string]any{"uri": "base"}}, 202, ""},
		{"a snapshot", map[string]any{"snapshotId": "snap-1"}, 400, "snapshotId"},
		{"registry credentials", map[string]any{"image": map[string]any{"uri": "base", "auth": map[string]string{"username": "u", "password": "hunter2"}}}, 400, "image.auth"},
		{"volumes", map[string]any{"image": map[string]any{"uri": "base"}, "volumes": []any{map[string]any{"name": "v"}}}, 400, "volumes"},
		{"a GPU", map[string]any{"image": map[string]any{"uri": "base"}, "resourceLimits": map[string]string{"gpu": "1"}}, 400, "GPU"},
		{"a malformed quantity", map[string]any{"image": map[string]any{"uri": "base"}, "resourceLimits": map[string]string{"memory": "lots"}}, 400, "memory"},
		{"more than a key may hold", map[string]any{"image": map[string]any{"uri": "base"}, "resourceLimits": map[string]string{"cpu": "64"}}, 400, "cpus"},
		{"a timeout past the maximum", map[string]any{"image": map[string]any{"uri": "base"}, "timeout": 100 * 24 * 3600}, 400, "maximum"},
		{"a reserved metadata key", map[string]any{"image": map[string]any{"uri": "base"}, "metadata": map[string]string{core.IDLabel: "forged"}}, 400, "reserved"},
		{"deny rules", map[string]any{"image": map[string]any{"uri": "base"}, "networkPolicy": map[string]any{"defaultAction": "allow", "egress": []any{map[string]string{"action": "deny", "target": "x.com"}}}}, 400, "networkPolicy"},
	} {
		r := e.OSBCall("POST", "/v1/sandboxes", testKey, c.body, nil)
		if r.Status != c.status || !strings.Contains(string(r.Body), c.want) {
			t.Errorf("%s: %d %s", c.name, r.Status, r.Body)
		}
		if strings.Contains(string(r.Body), "hunter2") {
			t.Errorf("%s: the answer echoes the password", c.name)
		}
	}
}

// TestOpenSandboxTimeoutEndsIt: the server deletes a sandbox when its
// timeout passes, on its side and the provider's.
func TestOpenSandboxTimeoutEndsIt(t *testing.T) {
	p, _ := servetest.HostFake(t)
	e := newEnvOver(t, p, "host", nil)
	sb := e.OSBCreate(testKey, servetest.OSBImageBody(map[string]any{"timeout": 1}))
	eventually(t, "gone after its timeout", func() bool {
		return e.OSBCall("GET", "/v1/sandboxes/"+sb.ID, testKey, nil, nil).Status == http.StatusNotFound && e.BackendGone(sb.ID)
	})
}

// TestOpenSandboxListAndRenew: list filters by metadata and state and
// pages; renew moves the end later only.
func TestOpenSandboxListAndRenew(t *testing.T) {
	p, _ := servetest.HostFake(t)
	e := newEnvOver(t, p, "host", nil)
	var ids []string
	for i := range 3 {
		role := "a"
		if i == 2 {
			role = "b"
		}
		ids = append(ids, e.OSBCreate(testKey, servetest.OSBImageBody(map[string]any{"metadata": map[string]string{"suite": "s", "role": role}})).ID)
	}
	list := func(q string) opensandbox.ListResponse {
		var l opensandbox.ListResponse
		r := e.OSBCall("GET", "/v1/sandboxes?"+q, testKey, nil, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("list %s: %d %s", q, r.Status, r.Body)
		}
		r.JSON(t, &l)
		return l
	}
	if l := list("metadata=suite%3Ds%26role%3Db"); len(l.Items) != 1 || l.Items[0].ID != ids[2] {
		t.Fatalf("metadata filter: %+v", l.Items)
	}
	if l := list("state=running&pageSize=2"); len(l.Items) != 2 || !l.Pagination.HasNextPage || l.Pagination.TotalItems != 3 || l.Pagination.TotalPages != 2 || l.Items[0].ID != ids[0] {
		t.Fatalf("page 1: %+v", l)
	}
	if l := list("state=Running&pageSize=2&page=2"); len(l.Items) != 1 || l.Pagination.HasNextPage || l.Items[0].ID != ids[2] {
		t.Fatalf("page 2: %+v", l)
	}
	if l := list("state=Paused"); len(l.Items) != 0 {
		t.Fatalf("state Paused: %+v", l.Items)
	}
	if r := e.OSBCall("GET", "/v1/sandboxes?pageSize=0", testKey, nil, nil); r.Status != http.StatusBadRequest {
		t.Fatalf("pageSize 0: %d", r.Status)
	}
	later := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	var rr opensandbox.RenewResponse
	r := e.OSBCall("POST", "/v1/sandboxes/"+ids[0]+"/renew-expiration", testKey, map[string]any{"expiresAt": later}, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("renew: %d %s", r.Status, r.Body)
	}
	r.JSON(t, &rr)
	if d := rr.ExpiresAt.Sub(later); d < -time.Second || d > time.Second {
		t.Fatalf("renewed to %v, asked %v", rr.ExpiresAt, later)
	}
	if r := e.OSBCall("POST", "/v1/sandboxes/"+ids[0]+"/renew-expiration", testKey, map[string]any{"expiresAt": time.Now().Add(time.Minute)}, nil); r.Status != http.StatusBadRequest {
		t.Fatalf("renew earlier: %d %s", r.Status, r.Body)
	}
	for _, p := range []string{"/v1/sandboxes/" + ids[0] + "/pause", "/v1/snapshots/x"} {
		if r := e.OSBCall("POST", p, testKey, nil, nil); r.Status != http.StatusNotImplemented {
			t.Errorf("%s: %d %s", p, r.Status, r.Body)
		}
	}
	if r := e.OSBCall("POST", "/v1/metrics/events", testKey, map[string]any{"eventType": "sandbox.create"}, nil); r.Status != http.StatusNoContent {
		t.Fatalf("metrics events: %d", r.Status)
	}
}

// TestOpenSandboxEntrypoint: an entrypoint other than the SDKs' keep-alive
// runs in the background once the sandbox is created.
func TestOpenSandboxEntrypoint(t *testing.T) {
	e := newEnv(t, nil, nil)
	sb := e.OSBCreate(testKey, servetest.OSBImageBody(map[string]any{"entrypoint": []string{"sh", "-c", "echo started > /tmp/ep; sleep 600"}}))
	base, hdr := e.OSBEndpoint(testKey, sb.ID, opensandbox.ExecdPort)
	eventually(t, "the entrypoint ran", func() bool {
		r := e.Execd("GET", base, hdr, "", "/files/download?path=/tmp/ep", nil)
		return r.Status == http.StatusOK && string(r.Body) == "started\n"
	})
}
