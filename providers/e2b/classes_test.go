package e2b_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-sh/berth/providers/e2b"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/throttle"
)

// failingBackend is a provider behind berth serve whose creates all fail
// with one error, counted.
type failingBackend struct {
	driver.Provider // nil: serve calls only these methods
	err             error
	creates         atomic.Int32
}

func (b *failingBackend) Create(context.Context, driver.Spec) (driver.Sandbox, error) {
	b.creates.Add(1)
	return nil, b.err
}

func (b *failingBackend) Capabilities() driver.Capabilities {
	return driver.Capabilities{Networks: []driver.NetworkMode{driver.NetworkNone}}
}

func (b *failingBackend) Close() error { return nil }

// TestClassesSurviveServe: an error class the backend of berth serve
// returns reaches the e2b driver as the same class, and the create gate
// retries only what its class allows. On 6f9918d serve answered a
// timed-out create 504, the driver read 504 as Unavailable, and the gate
// created four times: checked there, this test failed.
func TestClassesSurviveServe(t *testing.T) {
	for _, tc := range []struct {
		class sandbox.Class
		tries int32
	}{
		{sandbox.DeadlineExceeded, 1},
		// (NotFound is left out: a 404 on POST /v2/sandboxes is also how a
		// server without the v2 routes answers, so the driver asks v1 once.)
		{sandbox.AlreadyExists, 1},
		{sandbox.Unauthenticated, 1},
		{sandbox.ResourceExhausted, 4},
		{sandbox.InvalidArgument, 1},
		{sandbox.NotSupported, 1},
		{sandbox.Unknown, 1},
		{sandbox.Unavailable, 4},
	} {
		t.Run(tc.class.String(), func(t *testing.T) {
			backend := &failingBackend{err: sandbox.Errorf(tc.class, "backend says %v", tc.class)}
			urls, key := startServe(t, sandbox.NewProvider("failing", backend), "img")
			d, err := e2b.New(e2b.Options{APIKey: registry.Secret(key), APIURL: urls.APIURL, SandboxURL: urls.SandboxURL, Domain: urls.Domain})
			if err != nil {
				t.Fatal(err)
			}
			p := sandbox.NewProvider("e2b", d)
			defer p.Close()
			g := throttle.New(sandbox.Limits{Retries: 3, BackoffBase: time.Millisecond, BackoffMax: time.Millisecond})
			defer g.Close()
			_, _, err = g.Create(testCtx(t), p, sandbox.Spec{Image: "base"})
			if sandbox.ClassOf(err) != tc.class {
				t.Errorf("create: %v (class %v), want class %v", err, sandbox.ClassOf(err), tc.class)
			}
			if n := backend.creates.Load(); n != tc.tries {
				t.Errorf("the backend was asked to create %d times, want %d", n, tc.tries)
			}
		})
	}
}
