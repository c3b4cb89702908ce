package e2bserve

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/internal/apikeys"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/serve/internal/core"
	"github.com/berth-sh/berth/serve/internal/servetest"
)

// replicas starts two stateless servers over one provider, as two
// replicas of berth serve share a cluster and a key file.
func replicas(t *testing.T, mutate func(*core.Options)) (*testEnv, *testEnv) {
	t.Helper()
	p := servetest.OpenShared(t, nil)
	opts := func(o *core.Options) {
		o.Stateless = true
		if mutate != nil {
			mutate(o)
		}
	}
	return newEnvOver(t, p, "host", opts), newEnvOver(t, p, "host", opts)
}

// Two stateless replicas serve each other's sandboxes: what one creates the
// other gets (the same token), lists, runs commands in, extends and kills;
// another key's sandbox is as unknown there as here; and what one replica
// knew of a sandbox is nothing the other lacks.
func TestStatelessReplicas(t *testing.T) {
	a, b := replicas(t, nil)
	sb := a.Create(testKey, map[string]any{"metadata": map[string]string{"suite": "s1"}, "envVars": map[string]string{"E": "1"}, "timeout": 100})

	r := b.Call("GET", "/sandboxes/"+sb.SandboxID, testKey, nil, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("get on the other replica: %d %s", r.Status, r.Body)
	}
	var got e2bapi.SandboxDetail
	r.JSON(t, &got)
	if got.EnvdAccessToken != sb.EnvdAccessToken || got.Metadata["suite"] != "s1" || len(got.Metadata) != 1 || got.TemplateID != "base" {
		t.Fatalf("the other replica's record: %+v", got)
	}
	if r := b.Call("GET", "/sandboxes/"+sb.SandboxID, otherKey, nil, nil); r.Status != http.StatusNotFound {
		t.Errorf("another key's get on the other replica: %d", r.Status)
	}
	var listed []e2bapi.ListedSandbox
	b.Call("GET", "/v2/sandboxes?metadata=suite%3Ds1", testKey, nil, nil).JSON(t, &listed)
	if len(listed) != 1 || listed[0].SandboxID != sb.SandboxID {
		t.Errorf("list on the other replica: %+v", listed)
	}

	// The data plane of either replica reaches the sandbox, with its token.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.EnvdClient(sb).WriteFile(ctx, "/tmp/from-a", strings.NewReader("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	pr, err := b.EnvdClient(sb).Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", "cat /tmp/from-a; echo $E"}, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := pr.Wait(ctx); err != nil || code != 0 || out.String() != "hello1\n" {
		t.Fatalf("exec through the other replica: %q %d %v", out.String(), code, err)
	}
	// SDKs 2.7 - 2.14.0 name the sandbox by its token alone.
	if r := b.filesCall("GET", "path=/tmp/from-a", nil, map[string]string{envd.AccessTokenHeader: sb.EnvdAccessToken}); r.Status != http.StatusOK || string(r.Body) != "hello" {
		t.Errorf("/files by token on the other replica: %d %q", r.Status, r.Body)
	}
	if r := b.filesCall("GET", "path=/tmp/from-a", nil, map[string]string{e2bapi.SandboxIDHeader: sb.SandboxID, envd.AccessTokenHeader: "wrong"}); r.Status != http.StatusUnauthorized {
		t.Errorf("a wrong token on the other replica: %d", r.Status)
	}

	// A timeout set on one replica is the sandbox's on the other.
	if r := b.Call("POST", "/sandboxes/"+sb.SandboxID+"/timeout", testKey, map[string]int{"timeout": 1000}, nil); r.Status != http.StatusNoContent {
		t.Fatalf("timeout on the other replica: %d %s", r.Status, r.Body)
	}
	if d := a.lifetime(sb.SandboxID); d < 990*time.Second {
		t.Errorf("the first replica sees %v left, want about 1000 s", d)
	}

	// One replica's end takes nothing away: its sandboxes live on.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if a.BackendGone(sb.SandboxID) {
		t.Fatalf("closing a replica deleted its sandbox")
	}
	if r := b.Call("DELETE", "/sandboxes/"+sb.SandboxID, testKey, nil, nil); r.Status != http.StatusNoContent {
		t.Fatalf("kill on the other replica: %d %s", r.Status, r.Body)
	}
	if !b.BackendGone(sb.SandboxID) {
		t.Errorf("the provider still has the killed sandbox")
	}
	if r := b.Call("DELETE", "/sandboxes/"+sb.SandboxID, testKey, nil, nil); r.Status != http.StatusNotFound {
		t.Errorf("a second kill: %d", r.Status)
	}
}

// The per-key limit counts the key's sandboxes on every replica.
func TestStatelessLimitAcrossReplicas(t *testing.T) {
	a, b := replicas(t, func(o *core.Options) { o.MaxSandboxesPerKey = 2 })
	a.Create(testKey, nil)
	b.Create(testKey, nil)
	if r := a.Call("POST", "/v2/sandboxes", testKey, map[string]any{}, nil); r.Status != http.StatusTooManyRequests {
		t.Fatalf("a third sandbox of the key, made on either replica: %d %s", r.Status, r.Body)
	}
	b.Create(otherKey, nil)
}

// A sandbox expires on every replica at the time its TTL says, whichever
// replica set it, and the replica that finds it expired deletes it.
func TestStatelessExpiry(t *testing.T) {
	a, b := replicas(t, nil)
	sb := a.Create(testKey, map[string]any{"timeout": 100})
	if r := b.Call("GET", "/sandboxes/"+sb.SandboxID, testKey, nil, nil); r.Status != http.StatusOK {
		t.Fatalf("get on the other replica: %d", r.Status)
	}
	if r := b.Call("POST", "/sandboxes/"+sb.SandboxID+"/timeout", testKey, map[string]int{"timeout": 1}, nil); r.Status != http.StatusNoContent {
		t.Fatalf("timeout: %d %s", r.Status, r.Body)
	}
	eventually(t, "the sandbox gone on the first replica", func() bool {
		return a.Call("GET", "/sandboxes/"+sb.SandboxID, testKey, nil, nil).Status == http.StatusNotFound
	})
	eventually(t, "the expired sandbox deleted from the provider", func() bool { return a.BackendGone(sb.SandboxID) })
}

// A sandbox whose labels claim a record the owner's key did not make (its
// token's hash does not match the key) is not served: labels are not
// trusted to say who owns a token.
func TestStatelessForgedLabels(t *testing.T) {
	a, _ := replicas(t, nil)
	ctx := context.Background()
	labels := map[string]string{core.IDLabel: "forgedforgedforged00", core.LauncherLabel: core.LauncherValue}
	core.StateLabels(labels, &core.Record{KeyID: apikeys.ID(testKey), Token: "a-token-the-attacker-knows", TemplateID: "base", Resources: core.DefaultResources}, false)
	sb, err := a.P.Create(ctx, sandbox.Spec{Image: "host", Labels: labels, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	defer sb.Delete(ctx)
	if r := a.filesCall("GET", "path=/etc/hostname", nil, map[string]string{e2bapi.SandboxIDHeader: "forgedforgedforged00", envd.AccessTokenHeader: "a-token-the-attacker-knows"}); r.Status != http.StatusBadGateway {
		t.Errorf("the forged sandbox was served: %d %s", r.Status, r.Body)
	}
	if r := a.Call("GET", "/sandboxes/forgedforgedforged00", testKey, nil, nil); r.Status != http.StatusNotFound {
		t.Errorf("the forged sandbox's record: %d %s", r.Status, r.Body)
	}
}

// A stateless server needs a provider whose sandboxes every process sees.
func TestStatelessNeedsSharedState(t *testing.T) {
	keys := newEnv(t, nil, nil).C.Options().Keys
	_, err := core.New(core.Options{Provider: openFake(t, nil), Keys: keys, BaseImage: "host", Stateless: true})
	if sandbox.ClassOf(err) != sandbox.InvalidArgument {
		t.Fatalf("stateless over a provider of one process: %v", err)
	}
}

// A sandbox whose ports are private stays private on every replica: the
// other replica, which never saw its create, still asks for the traffic
// token (derived from the owner's key like the access token) and takes
// the one the creating replica handed out. A record rebuilt without it
// would have opened the sandbox's ports to anyone.
func TestStatelessPrivateTraffic(t *testing.T) {
	a, b := replicas(t, nil)
	sb := a.Create(testKey, map[string]any{"timeout": 120, "network": map[string]any{"allowPublicTraffic": false}})
	if sb.TrafficAccessToken == nil {
		t.Fatal("create answered no traffic token")
	}
	port := freePort(t)
	a.Httpd(sb.SandboxID, port, "private")
	host := fmt.Sprintf("%d-%s.localhost", port, sb.SandboxID)
	if r := b.Call("GET", "/", "", nil, map[string]string{"Host": host}); r.Status != http.StatusForbidden || strings.Contains(string(r.Body), "private") {
		t.Fatalf("the other replica without the token: %d %q, want 403", r.Status, r.Body)
	}
	r := b.Call("GET", "/", "", nil, map[string]string{"Host": host, "E2b-Traffic-Access-Token": *sb.TrafficAccessToken})
	if r.Status != http.StatusOK || strings.TrimSpace(string(r.Body)) != "private" {
		t.Fatalf("the other replica with the token: %d %q", r.Status, r.Body)
	}
	var c e2bapi.Sandbox
	b.Call("POST", "/sandboxes/"+sb.SandboxID+"/connect", testKey, map[string]any{"timeout": 60}, nil).JSON(t, &c)
	if c.TrafficAccessToken == nil || *c.TrafficAccessToken != *sb.TrafficAccessToken {
		t.Fatalf("connect on the other replica answered traffic token %v", c.TrafficAccessToken)
	}
	// A public sandbox carries no token and no label asking for one.
	pub := a.Create(testKey, map[string]any{"timeout": 120})
	if pub.TrafficAccessToken != nil {
		t.Errorf("a public sandbox got a traffic token")
	}
}
