package e2bserve

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"testing"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/internal/apikeys"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/serve/internal/core"
	"github.com/berth-sh/berth/serve/internal/servetest"
)

// TestSandboxesGetDefaultLimits: a key holder's sandbox is created with
// hard limits on cpus, memory and disk even though the E2B create call
// names none. On 6f9918d the Spec had no resources at all (unlimited on
// the local provider): checked there, this test failed.
func TestSandboxesGetDefaultLimits(t *testing.T) {
	p, rec := servetest.HostFake(t)
	e := newEnvOver(t, p, "host", nil)
	e.Create(testKey, map[string]any{})
	specs := rec.Specs()
	if len(specs) != 1 {
		t.Fatalf("%d creates", len(specs))
	}
	r := specs[0].Resources
	if r.CPUs <= 0 || r.MemoryMB <= 0 || r.StorageMB <= 0 || !r.Limits {
		t.Fatalf("a served sandbox's resources: %+v; want cpu, memory and disk limits", r)
	}
}

// TestLimitsAndKeyCeiling: the operator's limits reach the Spec (pids
// included), and a key whose sandboxes would pass its ceiling is answered
// 429 with Retry-After until one is killed.
func TestLimitsAndKeyCeiling(t *testing.T) {
	p, rec := servetest.HostFake(t)
	e := newEnvOver(t, p, "host", func(o *core.Options) {
		o.Resources = sandbox.Resources{CPUs: 0.5, MemoryMB: 256, StorageMB: 512, PIDs: 100}
		o.KeyCeiling = sandbox.Resources{CPUs: 1}
	})
	a := e.Create(testKey, map[string]any{})
	e.Create(testKey, map[string]any{})
	r := e.Call("POST", "/v2/sandboxes", testKey, map[string]any{}, nil)
	if r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
		t.Fatalf("a third sandbox of 0.5 cpus past a 1-cpu ceiling: %d %s", r.Status, r.Body)
	}
	// Another key has a ceiling of its own.
	e.Create(otherKey, map[string]any{})
	if r := e.Call("DELETE", "/sandboxes/"+a.SandboxID, testKey, nil, nil); r.Status != http.StatusNoContent {
		t.Fatalf("kill: %d %s", r.Status, r.Body)
	}
	e.Create(testKey, map[string]any{})
	want := sandbox.Resources{CPUs: 0.5, MemoryMB: 256, StorageMB: 512, PIDs: 100, Limits: true}
	for _, s := range rec.Specs() {
		if s.Resources != want {
			t.Errorf("spec resources %+v, want %+v", s.Resources, want)
		}
	}
	if _, err := core.New(core.Options{Provider: p, Keys: e.C.Options().Keys, BaseImage: "host", Resources: sandbox.Resources{CPUs: 4}, KeyCeiling: sandbox.Resources{CPUs: 2}}); err == nil {
		t.Error("a ceiling below one sandbox's limits was accepted")
	}
}

// collidingKeys returns two keys whose SHA-256 share their first 4 bytes:
// what an 8-hex-digit key ID could not tell apart.
func collidingKeys(t *testing.T) (string, string) {
	seen := map[[4]byte]string{}
	for i := 0; i < 1<<22; i++ {
		k := fmt.Sprintf("berth_collide_%016x", i)
		sum := sha256.Sum256([]byte(k))
		var pre [4]byte
		copy(pre[:], sum[:4])
		if other, ok := seen[pre]; ok {
			return other, k
		}
		seen[pre] = k
	}
	t.Fatal("no colliding prefix found")
	return "", ""
}

// TestKeysWithACollidingHashPrefixShareNothing is the attack: a key holder
// who finds (or is handed) a key whose SHA-256 starts like another's must
// not own that key's sandboxes. On 6f9918d ownership was the first 32 bits
// of the hash: checked there, the two keys had one identity (key-dd0525c7)
// and this test failed.
func TestKeysWithACollidingHashPrefixShareNothing(t *testing.T) {
	k1, k2 := collidingKeys(t)
	if apikeys.ID(k1) == apikeys.ID(k2) {
		t.Fatalf("two keys share the identity %s", apikeys.ID(k1))
	}
	p, _ := servetest.HostFake(t)
	e := newEnvOver(t, p, "host", func(o *core.Options) {
		kr, err := apikeys.New(k1, k2)
		if err != nil {
			t.Fatal(err)
		}
		o.Keys = kr
	})
	sb := e.Create(k1, map[string]any{})
	var listed []e2bapi.ListedSandbox
	e.Call("GET", "/v2/sandboxes", k2, nil, nil).JSON(t, &listed)
	if len(listed) != 0 {
		t.Errorf("the other key lists %d sandboxes of the first", len(listed))
	}
	for _, m := range []string{"GET", "DELETE"} {
		if r := e.Call(m, "/sandboxes/"+sb.SandboxID, k2, nil, nil); r.Status != http.StatusNotFound {
			t.Errorf("%s by the other key: %d, want 404", m, r.Status)
		}
	}
	if r := e.Call("GET", "/sandboxes/"+sb.SandboxID, k1, nil, nil); r.Status != http.StatusOK {
		t.Errorf("the owner lost its sandbox: %d", r.Status)
	}
}
