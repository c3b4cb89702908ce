package serve

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/serve/apikeys"
	"github.com/berth-sh/berth/serve/opensandbox"
)

// sharedProvider says the fake's sandboxes are shared, which they are: the
// fake keeps them in a state directory every provider value on it reads.
type sharedProvider struct{ driver.Provider }

func (p sharedProvider) Capabilities() driver.Capabilities {
	c := p.Provider.Capabilities()
	c.SharedState = true
	return c
}

// newStatelessEnv is one stateless server over the shared fake.
func newStatelessEnv(t testing.TB, mutate func(*Options)) *testEnv {
	t.Helper()
	p := openFake(t, func(d driver.Provider) driver.Provider { return sharedProvider{d} })
	return newEnvOver(t, p, "host", func(o *Options) {
		o.Stateless = true
		if mutate != nil {
			mutate(o)
		}
	})
}

// replicas starts two stateless servers over one provider, as two
// replicas of berth serve share a cluster and a key file.
func replicas(t *testing.T, mutate func(*Options)) (*testEnv, *testEnv) {
	t.Helper()
	p := openFake(t, func(d driver.Provider) driver.Provider { return sharedProvider{d} })
	opts := func(o *Options) {
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
	sb := a.create(testKey, map[string]any{"metadata": map[string]string{"suite": "s1"}, "envVars": map[string]string{"E": "1"}, "timeout": 100})

	r := b.call("GET", "/sandboxes/"+sb.SandboxID, testKey, nil, nil)
	if r.status != http.StatusOK {
		t.Fatalf("get on the other replica: %d %s", r.status, r.body)
	}
	var got e2bapi.SandboxDetail
	r.json(t, &got)
	if got.EnvdAccessToken != sb.EnvdAccessToken || got.Metadata["suite"] != "s1" || len(got.Metadata) != 1 || got.TemplateID != "base" {
		t.Fatalf("the other replica's record: %+v", got)
	}
	if r := b.call("GET", "/sandboxes/"+sb.SandboxID, otherKey, nil, nil); r.status != http.StatusNotFound {
		t.Errorf("another key's get on the other replica: %d", r.status)
	}
	var listed []e2bapi.ListedSandbox
	b.call("GET", "/v2/sandboxes?metadata=suite%3Ds1", testKey, nil, nil).json(t, &listed)
	if len(listed) != 1 || listed[0].SandboxID != sb.SandboxID {
		t.Errorf("list on the other replica: %+v", listed)
	}

	// The data plane of either replica reaches the sandbox, with its token.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.envdClient(sb).WriteFile(ctx, "/tmp/from-a", strings.NewReader("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	pr, err := b.envdClient(sb).Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", "cat /tmp/from-a; echo $E"}, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := pr.Wait(ctx); err != nil || code != 0 || out.String() != "hello1\n" {
		t.Fatalf("exec through the other replica: %q %d %v", out.String(), code, err)
	}
	// SDKs 2.7 - 2.14.0 name the sandbox by its token alone.
	if r := b.filesCall("GET", "path=/tmp/from-a", nil, map[string]string{envd.AccessTokenHeader: sb.EnvdAccessToken}); r.status != http.StatusOK || string(r.body) != "hello" {
		t.Errorf("/files by token on the other replica: %d %q", r.status, r.body)
	}
	if r := b.filesCall("GET", "path=/tmp/from-a", nil, map[string]string{e2bapi.SandboxIDHeader: sb.SandboxID, envd.AccessTokenHeader: "wrong"}); r.status != http.StatusUnauthorized {
		t.Errorf("a wrong token on the other replica: %d", r.status)
	}

	// A timeout set on one replica is the sandbox's on the other.
	if r := b.call("POST", "/sandboxes/"+sb.SandboxID+"/timeout", testKey, map[string]int{"timeout": 1000}, nil); r.status != http.StatusNoContent {
		t.Fatalf("timeout on the other replica: %d %s", r.status, r.body)
	}
	if d := a.lifetime(sb.SandboxID); d < 990*time.Second {
		t.Errorf("the first replica sees %v left, want about 1000 s", d)
	}

	// One replica's end takes nothing away: its sandboxes live on.
	if err := a.s.Close(); err != nil {
		t.Fatal(err)
	}
	if a.backendGone(sb.SandboxID) {
		t.Fatalf("closing a replica deleted its sandbox")
	}
	if r := b.call("DELETE", "/sandboxes/"+sb.SandboxID, testKey, nil, nil); r.status != http.StatusNoContent {
		t.Fatalf("kill on the other replica: %d %s", r.status, r.body)
	}
	if !b.backendGone(sb.SandboxID) {
		t.Errorf("the provider still has the killed sandbox")
	}
	if r := b.call("DELETE", "/sandboxes/"+sb.SandboxID, testKey, nil, nil); r.status != http.StatusNotFound {
		t.Errorf("a second kill: %d", r.status)
	}
}

// The per-key limit counts the key's sandboxes on every replica.
func TestStatelessLimitAcrossReplicas(t *testing.T) {
	a, b := replicas(t, func(o *Options) { o.MaxSandboxesPerKey = 2 })
	a.create(testKey, nil)
	b.create(testKey, nil)
	if r := a.call("POST", "/v2/sandboxes", testKey, map[string]any{}, nil); r.status != http.StatusTooManyRequests {
		t.Fatalf("a third sandbox of the key, made on either replica: %d %s", r.status, r.body)
	}
	b.create(otherKey, nil)
}

// A sandbox expires on every replica at the time its TTL says, whichever
// replica set it, and the replica that finds it expired deletes it.
func TestStatelessExpiry(t *testing.T) {
	a, b := replicas(t, nil)
	sb := a.create(testKey, map[string]any{"timeout": 100})
	if r := b.call("GET", "/sandboxes/"+sb.SandboxID, testKey, nil, nil); r.status != http.StatusOK {
		t.Fatalf("get on the other replica: %d", r.status)
	}
	if r := b.call("POST", "/sandboxes/"+sb.SandboxID+"/timeout", testKey, map[string]int{"timeout": 1}, nil); r.status != http.StatusNoContent {
		t.Fatalf("timeout: %d %s", r.status, r.body)
	}
	eventually(t, "the sandbox gone on the first replica", func() bool {
		return a.call("GET", "/sandboxes/"+sb.SandboxID, testKey, nil, nil).status == http.StatusNotFound
	})
	eventually(t, "the expired sandbox deleted from the provider", func() bool { return a.backendGone(sb.SandboxID) })
}

// A sandbox whose labels claim a record the owner's key did not make (its
// token's hash does not match the key) is not served: labels are not
// trusted to say who owns a token.
func TestStatelessForgedLabels(t *testing.T) {
	a, _ := replicas(t, nil)
	ctx := context.Background()
	labels := map[string]string{IDLabel: "forgedforgedforged00", LauncherLabel: LauncherValue}
	stateLabels(labels, apikeys.ID(testKey), "a-token-the-attacker-knows", "base", false, DefaultResources, false)
	sb, err := a.p.Create(ctx, sandbox.Spec{Image: "host", Labels: labels, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	defer sb.Delete(ctx)
	if r := a.filesCall("GET", "path=/etc/hostname", nil, map[string]string{e2bapi.SandboxIDHeader: "forgedforgedforged00", envd.AccessTokenHeader: "a-token-the-attacker-knows"}); r.status != http.StatusBadGateway {
		t.Errorf("the forged sandbox was served: %d %s", r.status, r.body)
	}
	if r := a.call("GET", "/sandboxes/forgedforgedforged00", testKey, nil, nil); r.status != http.StatusNotFound {
		t.Errorf("the forged sandbox's record: %d %s", r.status, r.body)
	}
}

// A stateless server needs a provider whose sandboxes every process sees.
func TestStatelessNeedsSharedState(t *testing.T) {
	keys := newEnv(t, nil, nil).s.opts.Keys
	_, err := New(Options{Provider: openFake(t, nil), Keys: keys, BaseImage: "host", Stateless: true})
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
	sb := a.create(testKey, map[string]any{"timeout": 120, "network": map[string]any{"allowPublicTraffic": false}})
	if sb.TrafficAccessToken == nil {
		t.Fatal("create answered no traffic token")
	}
	port := freePort(t)
	a.httpd(sb.SandboxID, port, "private")
	host := fmt.Sprintf("%d-%s.localhost", port, sb.SandboxID)
	if r := b.call("GET", "/", "", nil, map[string]string{"Host": host}); r.status != http.StatusForbidden || strings.Contains(string(r.body), "private") {
		t.Fatalf("the other replica without the token: %d %q, want 403", r.status, r.body)
	}
	r := b.call("GET", "/", "", nil, map[string]string{"Host": host, "E2b-Traffic-Access-Token": *sb.TrafficAccessToken})
	if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != "private" {
		t.Fatalf("the other replica with the token: %d %q", r.status, r.body)
	}
	var c e2bapi.Sandbox
	b.call("POST", "/sandboxes/"+sb.SandboxID+"/connect", testKey, map[string]any{"timeout": 60}, nil).json(t, &c)
	if c.TrafficAccessToken == nil || *c.TrafficAccessToken != *sb.TrafficAccessToken {
		t.Fatalf("connect on the other replica answered traffic token %v", c.TrafficAccessToken)
	}
	// A public sandbox carries no token and no label asking for one.
	pub := a.create(testKey, map[string]any{"timeout": 120})
	if pub.TrafficAccessToken != nil {
		t.Errorf("a public sandbox got a traffic token")
	}
}

// listHook runs a function before each List of the provider.
type listHook struct {
	driver.Provider
	before atomic.Pointer[func(labels map[string]string)]
}

func (p *listHook) List(ctx context.Context, labels map[string]string) ([]driver.Info, error) {
	if f := p.before.Load(); f != nil {
		(*f)(labels)
	}
	return p.Provider.List(ctx, labels)
}

// A lookup of a sandbox this replica alone serves (the OpenSandbox API's)
// that runs while its record is added finds the record, and deletes
// nothing. On the stateless store such a lookup asks the provider, which
// never lists the replica's own records; its record, added meanwhile, was
// then taken for a sandbox gone from the provider and deleted: a create's
// answer racing its own record's add deleted the sandbox it had just
// made (TestOpenSandboxGymSequence/fake-stateless: the endpoint lookups
// and the ping after create were 404). The hook adds the record while the
// lookup's List runs, the interleaving the race had.
func TestStatelessLookupWhileAdded(t *testing.T) {
	var hook *listHook
	p := openFake(t, func(d driver.Provider) driver.Provider {
		hook = &listHook{Provider: sharedProvider{d}}
		return hook
	})
	e := newEnvOver(t, p, "host", func(o *Options) {
		o.Stateless = true
		anyImage(o)
	})
	created := e.osbCreate(testKey, map[string]any{"image": map[string]any{"uri": "host"}, "timeout": 600})
	ss := e.s.st.(*sharedStore)
	rec := ss.local.take(created.ID) // as it was before its create added it
	if rec == nil {
		t.Fatal("the create left no record")
	}
	var once sync.Once
	addDuringList := func(labels map[string]string) {
		if labels[IDLabel] == created.ID {
			once.Do(func() { ss.local.add(rec) })
		}
	}
	hook.before.Store(&addDuringList)
	got := ss.get(created.ID)
	hook.before.Store(nil)
	e.s.bg.Wait() // a delete the lookup started has ended
	if got != rec {
		t.Errorf("the lookup found %p, want the record added during it (%p)", got, rec)
	}
	if e.backendGone(created.ID) {
		t.Fatal("the lookup deleted the sandbox whose record was added during it")
	}
	if _, hdr := e.osbEndpoint(testKey, created.ID, opensandbox.ExecdPort); hdr[opensandbox.AccessTokenHeader] == "" {
		t.Fatalf("the endpoint after the lookup: %v", hdr)
	}
}
