package core

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/testing/fakeprovider"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/internal/apikeys"
)

const testKey = "test_key_aaaaaaaaaaaaaaaaaaaaaaaa"

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
// answer racing its own record's add deleted the sandbox it had just made
// (TestOpenSandboxGymSequence/fake-stateless: the endpoint lookups and the
// ping after create were 404, about 1 run in 8 under the race detector).
// The hook adds the record while the lookup's List runs, the interleaving
// the race had.
func TestStatelessLookupWhileAdded(t *testing.T) {
	hook := &listHook{}
	d, err := fakeprovider.New(fakeprovider.Options{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	hook.Provider = d
	p := sandbox.NewProvider("fake", sharedState{hook})
	defer p.Close()
	keys, err := apikeys.New(testKey)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Provider: p, Keys: keys, BaseImage: "host", Stateless: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	keyID, _ := keys.Check(testKey)
	ctx := context.Background()
	id := NewID()
	sb, err := p.Create(ctx, sandbox.Spec{Image: "host", TTL: time.Minute, Labels: map[string]string{IDLabel: id, LauncherLabel: LauncherValue}})
	if err != nil {
		t.Fatal(err)
	}
	backendID := sb.ID()
	defer func() { _ = p.Delete(ctx, backendID) }()
	rec := &Record{ID: id, KeyID: keyID, Token: RandomToken(), Metadata: map[string]string{}, Resources: s.opts.Resources, Sandbox: sb}
	if err := s.AttachPlane(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if over := s.Reserve(keyID, rec.Resources); over != "" {
		t.Fatal(over)
	}
	s.Arm(rec, time.Minute)

	var once sync.Once
	addDuringList := func(labels map[string]string) {
		if labels[IDLabel] == id {
			once.Do(func() {
				if !s.Add(rec) {
					t.Error("the record was not added")
				}
			})
		}
	}
	hook.before.Store(&addDuringList)
	got := s.Get(id)
	hook.before.Store(nil)
	s.bg.Wait() // a delete the lookup started has ended
	if got != rec {
		t.Errorf("the lookup found %p, want the record added during it (%p)", got, rec)
	}
	if infos, err := p.List(ctx, map[string]string{IDLabel: id}); err != nil || len(infos) != 1 {
		t.Fatalf("the lookup deleted the sandbox whose record was added during it: %+v %v", infos, err)
	}
}

// sharedState says the fake's sandboxes are shared, which they are.
type sharedState struct{ driver.Provider }

func (p sharedState) Capabilities() driver.Capabilities {
	c := p.Provider.Capabilities()
	c.SharedState = true
	return c
}
