package serve

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/driver"
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
	g := &gated{open: make(chan struct{}), fail: fail}
	e := newEnv(t, nil, func(d driver.Provider) driver.Provider { g.Provider = d; return g })
	e.s.osb.readyWait = 200 * time.Millisecond
	return e, g
}

// TestOpenSandboxPendingCreate: a create slower than the wait answers 202
// Pending; GET says Pending, a proxied ping is 503 with Retry-After until
// the provider is done, then the sandbox is Running and execd answers.
func TestOpenSandboxPendingCreate(t *testing.T) {
	e, g := newGatedEnv(t, nil)
	sb := e.osbCreate(testKey, osbImageBody(nil))
	if sb.Status.State != opensandbox.StatePending {
		t.Fatalf("create answered %+v, want Pending", sb.Status)
	}
	var got opensandbox.Sandbox
	e.osbCall("GET", "/v1/sandboxes/"+sb.ID, testKey, nil, nil).json(t, &got)
	if got.Status.State != opensandbox.StatePending {
		t.Fatalf("GET: %+v", got.Status)
	}
	// The endpoint is known before the sandbox runs, as upstream's is.
	base, hdr := e.osbEndpoint(testKey, sb.ID, opensandbox.ExecdPort)
	if r := e.execd("GET", base, hdr, "", "/ping", nil); r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
		t.Fatalf("ping while pending: %d %v %s", r.status, r.header, r.body)
	}
	close(g.open)
	eventually(t, "Running", func() bool {
		e.osbCall("GET", "/v1/sandboxes/"+sb.ID, testKey, nil, nil).json(t, &got)
		return got.Status.State == opensandbox.StateRunning
	})
	if r := e.execd("GET", base, hdr, "", "/ping", nil); r.status != http.StatusOK {
		t.Fatalf("ping once running: %d %s", r.status, r.body)
	}
}

// TestOpenSandboxDeleteWhilePending: a sandbox deleted while its create is
// in flight never goes live, and what the provider made is deleted.
func TestOpenSandboxDeleteWhilePending(t *testing.T) {
	e, g := newGatedEnv(t, nil)
	sb := e.osbCreate(testKey, osbImageBody(nil))
	if r := e.osbCall("DELETE", "/v1/sandboxes/"+sb.ID, testKey, nil, nil); r.status != http.StatusNoContent {
		t.Fatalf("delete while pending: %d %s", r.status, r.body)
	}
	close(g.open)
	if r := e.osbCall("GET", "/v1/sandboxes/"+sb.ID, testKey, nil, nil); r.status != http.StatusNotFound {
		t.Fatalf("GET after delete: %d %s", r.status, r.body)
	}
	// Nothing is left, and its slot was given back (after the delete: the
	// key never holds more than its maximum): it can hold its maximum again.
	eventually(t, "nothing left and the slot free", func() bool {
		infos, err := e.p.List(context.Background(), nil)
		st := e.s.st.(*store)
		st.mu.Lock()
		n := st.perKey[apikeyID(t, e, testKey)].n
		st.mu.Unlock()
		return err == nil && len(infos) == 0 && e.s.st.live() == 0 && n == 0
	})
}

// TestOpenSandboxFailedCreate: a create the provider refuses leaves the
// sandbox Failed with the reason, its proxy 502, and DELETE forgets it.
func TestOpenSandboxFailedCreate(t *testing.T) {
	e, g := newGatedEnv(t, sandbox.Errorf(sandbox.ResourceExhausted, "no capacity for image"))
	close(g.open)
	sb := e.osbCreate(testKey, osbImageBody(nil))
	var got opensandbox.Sandbox
	eventually(t, "Failed", func() bool {
		e.osbCall("GET", "/v1/sandboxes/"+sb.ID, testKey, nil, nil).json(t, &got)
		return got.Status.State == opensandbox.StateFailed
	})
	if !strings.Contains(got.Status.Message, "no capacity for image") || got.Status.Reason != "provision_failed" {
		t.Fatalf("failed status: %+v", got.Status)
	}
	base, hdr := e.osbEndpoint(testKey, sb.ID, opensandbox.ExecdPort)
	if r := e.execd("GET", base, hdr, "", "/ping", nil); r.status != http.StatusBadGateway || !strings.Contains(string(r.body), "no capacity") {
		t.Fatalf("ping of a failed sandbox: %d %s", r.status, r.body)
	}
	if r := e.osbCall("DELETE", "/v1/sandboxes/"+sb.ID, testKey, nil, nil); r.status != http.StatusNoContent {
		t.Fatalf("delete of a failed sandbox: %d %s", r.status, r.body)
	}
	if r := e.osbCall("GET", "/v1/sandboxes/"+sb.ID, testKey, nil, nil); r.status != http.StatusNotFound {
		t.Fatalf("GET after delete: %d %s", r.status, r.body)
	}
}

// TestOpenSandboxCloseDuringCreate: stopping the server while a create is
// in flight stops it; nothing is left (TestMain's leak check covers the
// goroutines).
func TestOpenSandboxCloseDuringCreate(t *testing.T) {
	e, _ := newGatedEnv(t, nil)
	e.osbCreate(testKey, osbImageBody(nil))
	e.s.Close()
	if infos, err := e.p.List(context.Background(), nil); err != nil || len(infos) != 0 {
		t.Fatalf("left after Close: %+v %v", infos, err)
	}
}

// TestOpenSandboxCreateMapping: what a create asks for reaches the provider
// as a spec: resourceLimits in Kubernetes forms as limits, metadata as
// labels with the server's own, env, timeout as TTL (and as the server's
// own timer), the network from the egress policy; unknown fields are
// accepted; what berth cannot honour is refused by name.
func TestOpenSandboxCreateMapping(t *testing.T) {
	p, rec := hostFake(t)
	e := newEnvOver(t, p, "host", func(o *Options) { o.OpenSandbox.Images = []string{"registry.example/"} })
	sb := e.osbCreate(testKey, map[string]any{
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
	rec.mu.Lock()
	spec := rec.specs[len(rec.specs)-1]
	rec.mu.Unlock()
	r := spec.Resources
	if spec.Image != "registry.example/swe:1" || r.CPUs != 2 || r.MemoryMB != 8192 || r.StorageMB != 20480 || !r.Limits || r.PIDs != DefaultResources.PIDs ||
		spec.TTL != 90*time.Second || spec.Env["A"] != "1" || spec.Network.Mode != sandbox.NetworkNone ||
		spec.Labels["team"] != "rl" || spec.Labels["nemo-gym.nvidia.com/run"] != "r1" || spec.Labels[IDLabel] != sb.ID || spec.Labels[LauncherLabel] != LauncherValue {
		t.Fatalf("spec: %+v", spec)
	}
	if d := time.Until(e.s.st.get(sb.ID).deadline()); d < 85*time.Second || d > 90*time.Second {
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
		{"a reserved metadata key", map[string]any{"image": map[string]any{"uri": "base"}, "metadata": map[string]string{IDLabel: "forged"}}, 400, "reserved"},
		{"deny rules", map[string]any{"image": map[string]any{"uri": "base"}, "networkPolicy": map[string]any{"defaultAction": "allow", "egress": []any{map[string]string{"action": "deny", "target": "x.com"}}}}, 400, "networkPolicy"},
	} {
		r := e.osbCall("POST", "/v1/sandboxes", testKey, c.body, nil)
		if r.status != c.status || !strings.Contains(string(r.body), c.want) {
			t.Errorf("%s: %d %s", c.name, r.status, r.body)
		}
		if strings.Contains(string(r.body), "hunter2") {
			t.Errorf("%s: the answer echoes the password", c.name)
		}
	}
}

// TestOpenSandboxTimeoutEndsIt: the server deletes a sandbox when its
// timeout passes, on its side and the provider's.
func TestOpenSandboxTimeoutEndsIt(t *testing.T) {
	p, _ := hostFake(t)
	e := newEnvOver(t, p, "host", nil)
	sb := e.osbCreate(testKey, osbImageBody(map[string]any{"timeout": 1}))
	eventually(t, "gone after its timeout", func() bool {
		return e.osbCall("GET", "/v1/sandboxes/"+sb.ID, testKey, nil, nil).status == http.StatusNotFound && e.backendGone(sb.ID)
	})
}

// TestOpenSandboxListAndRenew: list filters by metadata and state and
// pages; renew moves the end later only.
func TestOpenSandboxListAndRenew(t *testing.T) {
	p, _ := hostFake(t)
	e := newEnvOver(t, p, "host", nil)
	var ids []string
	for i := range 3 {
		role := "a"
		if i == 2 {
			role = "b"
		}
		ids = append(ids, e.osbCreate(testKey, osbImageBody(map[string]any{"metadata": map[string]string{"suite": "s", "role": role}})).ID)
	}
	list := func(q string) opensandbox.ListResponse {
		var l opensandbox.ListResponse
		r := e.osbCall("GET", "/v1/sandboxes?"+q, testKey, nil, nil)
		if r.status != http.StatusOK {
			t.Fatalf("list %s: %d %s", q, r.status, r.body)
		}
		r.json(t, &l)
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
	if r := e.osbCall("GET", "/v1/sandboxes?pageSize=0", testKey, nil, nil); r.status != http.StatusBadRequest {
		t.Fatalf("pageSize 0: %d", r.status)
	}
	later := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	var rr opensandbox.RenewResponse
	r := e.osbCall("POST", "/v1/sandboxes/"+ids[0]+"/renew-expiration", testKey, map[string]any{"expiresAt": later}, nil)
	if r.status != http.StatusOK {
		t.Fatalf("renew: %d %s", r.status, r.body)
	}
	r.json(t, &rr)
	if d := rr.ExpiresAt.Sub(later); d < -time.Second || d > time.Second {
		t.Fatalf("renewed to %v, asked %v", rr.ExpiresAt, later)
	}
	if r := e.osbCall("POST", "/v1/sandboxes/"+ids[0]+"/renew-expiration", testKey, map[string]any{"expiresAt": time.Now().Add(time.Minute)}, nil); r.status != http.StatusBadRequest {
		t.Fatalf("renew earlier: %d %s", r.status, r.body)
	}
	for _, p := range []string{"/v1/sandboxes/" + ids[0] + "/pause", "/v1/snapshots/x"} {
		if r := e.osbCall("POST", p, testKey, nil, nil); r.status != http.StatusNotImplemented {
			t.Errorf("%s: %d %s", p, r.status, r.body)
		}
	}
	if r := e.osbCall("POST", "/v1/metrics/events", testKey, map[string]any{"eventType": "sandbox.create"}, nil); r.status != http.StatusNoContent {
		t.Fatalf("metrics events: %d", r.status)
	}
}

// TestOpenSandboxEntrypoint: an entrypoint other than the SDKs' keep-alive
// runs in the background once the sandbox is created.
func TestOpenSandboxEntrypoint(t *testing.T) {
	e := newEnv(t, nil, nil)
	sb := e.osbCreate(testKey, osbImageBody(map[string]any{"entrypoint": []string{"sh", "-c", "echo started > /tmp/ep; sleep 600"}}))
	base, hdr := e.osbEndpoint(testKey, sb.ID, opensandbox.ExecdPort)
	eventually(t, "the entrypoint ran", func() bool {
		r := e.execd("GET", base, hdr, "", "/files/download?path=/tmp/ep", nil)
		return r.status == http.StatusOK && string(r.body) == "started\n"
	})
}

func apikeyID(t *testing.T, e *testEnv, key string) string {
	t.Helper()
	id, ok := e.s.opts.Keys.Check(key)
	if !ok {
		t.Fatal("the test key is not in the keyring")
	}
	return id
}
