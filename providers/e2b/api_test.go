package e2b_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/providers/e2b"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/throttle"
)

// A server without the v2 routes is served through v1, and the driver
// stops asking v2 once v1 answered.
func TestFallbackToV1(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v2     string
		v2List bool // list stays on v2
	}{
		{v2: "none"},               // every v2 route is 404
		{v2: "list", v2List: true}, // GET /v2/sandboxes exists, so POST is 405
	} {
		t.Run(tc.v2, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, fakeOptions{v2: tc.v2})
			f.noToken = true // so that Connect calls the connect route
			p := openProvider(t, f, nil)
			ctx := testCtx(t)
			var ids []string
			for range 2 {
				sb, err := p.Create(ctx, sandbox.Spec{Image: "base", Labels: map[string]string{"run": tc.v2}})
				if err != nil {
					t.Fatal(err)
				}
				defer sb.Close()
				ids = append(ids, sb.ID())
			}
			if n := f.callsOf("POST /v2/sandboxes"); n != 1 {
				t.Errorf("v2 create tried %d times, want once (then remembered)", n)
			}
			if n := f.callsOf("POST /sandboxes"); n != 2 {
				t.Errorf("v1 create called %d times, want 2", n)
			}
			var v1 struct {
				Secure *bool `json:"secure"`
			}
			if err := json.Unmarshal(f.body("POST /sandboxes")[0], &v1); err != nil || v1.Secure == nil || !*v1.Secure {
				t.Errorf("v1 create body lacks secure=true: %s", f.body("POST /sandboxes")[0])
			}
			infos, err := p.List(ctx, map[string]string{"run": tc.v2})
			if err != nil || len(infos) != 2 {
				t.Fatalf("list: %v, %v", infos, err)
			}
			if got := f.callsOf("GET /sandboxes") == 0; got != tc.v2List {
				t.Errorf("list stayed on v2: %v, want %v", got, tc.v2List)
			}
			sb, err := p.Connect(ctx, ids[0])
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close()
			if res, err := sb.Run(ctx, sandbox.Command{Args: []string{"true"}}); err != nil || res.ExitCode != 0 {
				t.Fatalf("run after connect: %+v, %v", res, err)
			}
			if f.callsOf("POST /sandboxes/"+ids[0]+"/connect") != 1 {
				t.Errorf("connect did not fall back to the v1 route: %v", f.calls)
			}
			for _, id := range ids {
				if err := p.Delete(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// A create the server throttles comes back at once with the advised wait;
// the create gate waits it out and the next try succeeds.
func TestCreateThrottle(t *testing.T) {
	t.Parallel()
	f := newFake(t, fakeOptions{})
	p := openProvider(t, f, nil)
	ctx := testCtx(t)
	f.mu.Lock()
	f.throttle, f.retryHdr = 1, "1"
	f.mu.Unlock()
	_, err := p.Create(ctx, sandbox.Spec{Image: "base"})
	if sandbox.ClassOf(err) != sandbox.ResourceExhausted {
		t.Fatalf("throttled create: %v (class %v), want ResourceExhausted", err, sandbox.ClassOf(err))
	}
	if sandbox.RetryAfterOf(err) != time.Second {
		t.Fatalf("throttled create carries no Retry-After of 1s: %v", err)
	}
	if n := f.callsOf("POST /v2/sandboxes"); n != 1 {
		t.Fatalf("the driver retried a create itself (%d calls); the gate decides", n)
	}

	f.mu.Lock()
	f.throttle = 1
	f.mu.Unlock()
	g := throttle.New(sandbox.Limits{})
	defer g.Close()
	sb, release, err := g.Create(ctx, p, sandbox.Spec{Image: "base"})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	defer sb.Close()
	ts := f.callTimes("POST /v2/sandboxes")
	if len(ts) != 3 {
		t.Fatalf("create calls %d, want 3", len(ts))
	}
	if gap := ts[2].Sub(ts[1]); gap < time.Second {
		t.Errorf("the gate retried after %v, before the advised 1s", gap)
	}
	if err := sb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
}

// Other calls wait out a throttle inside the driver, up to MaxRetries and
// MaxRetryWait.
func TestCallThrottle(t *testing.T) {
	t.Parallel()
	f := newFake(t, fakeOptions{})
	p := openProvider(t, f, nil)
	ctx := testCtx(t)
	f.mu.Lock()
	f.throttle, f.retryHdr = 1, "1"
	f.mu.Unlock()
	if _, err := p.List(ctx, nil); err != nil {
		t.Fatalf("list after one throttle: %v", err)
	}
	ts := f.callTimes("GET /v2/sandboxes")
	if len(ts) != 2 || ts[1].Sub(ts[0]) < time.Second {
		t.Errorf("list calls at %v: want a retry at least 1s after the throttle", ts)
	}

	// An advised wait over the bound is returned, not slept.
	short := openProvider(t, f, func(o *e2b.Options) { o.MaxRetryWait = 500 * time.Millisecond })
	f.mu.Lock()
	f.throttle, f.retryHdr = 1, "60"
	f.mu.Unlock()
	_, err := short.List(ctx, nil)
	if sandbox.ClassOf(err) != sandbox.ResourceExhausted {
		t.Errorf("list with a 60s Retry-After: %v, want ResourceExhausted at once", err)
	}

	// Retries are bounded.
	f.mu.Lock()
	f.throttle, f.retryHdr = 10, "0"
	f.mu.Unlock()
	none := openProvider(t, f, func(o *e2b.Options) { o.MaxRetries = 2 })
	before := f.callsOf("GET /v2/sandboxes")
	if _, err := none.List(ctx, nil); sandbox.ClassOf(err) != sandbox.ResourceExhausted {
		t.Errorf("list throttled on every try: %v", err)
	}
	if n := f.callsOf("GET /v2/sandboxes") - before; n != 3 {
		t.Errorf("list tried %d times with MaxRetries 2, want 3", n)
	}
}

// Control-plane answers map onto classes; not-found is read from the
// body's code too.
func TestErrorClasses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		body   string
		want   sandbox.Class
	}{
		{400, `{"code":400,"message":"bad"}`, sandbox.InvalidArgument},
		{401, `{"code":401,"message":"no"}`, sandbox.Unauthenticated},
		{403, `{"code":403,"message":"no"}`, sandbox.Unauthenticated},
		{404, `{"code":404,"message":"sandbox not found"}`, sandbox.NotFound},
		{404, ``, sandbox.NotFound},
		{500, `{"code":404,"message":"sandbox not found"}`, sandbox.NotFound},
		{409, `{"code":409,"message":"already paused"}`, sandbox.AlreadyExists},
		{429, `{"code":429,"message":"slow down"}`, sandbox.ResourceExhausted},
		// 500 is a failure the server did not class: Unknown, not retried
		// (the one HTTP mapping of sandbox/errdefs; berth serve answers 500
		// for exactly that). 504 is a timeout, DeadlineExceeded: on
		// 6f9918d the driver read it as Unavailable and retried it.
		{500, `{"code":500,"message":"oops"}`, sandbox.Unknown},
		{504, ``, sandbox.DeadlineExceeded},
		{502, `bad gateway`, sandbox.Unavailable},
		{503, `service busy`, sandbox.Unavailable},
		{501, ``, sandbox.NotSupported},
	} {
		t.Run(fmt.Sprint(tc.status, tc.body), func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			d, err := e2b.New(e2b.Options{APIKey: registry.Secret("k-classes"), APIURL: srv.URL, MaxRetries: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			err = sandbox.NewProvider("e2b", d).Delete(testCtx(t), "abc123")
			if sandbox.ClassOf(err) != tc.want || (tc.want != sandbox.Unknown && !errors.Is(err, tc.want.Sentinel())) {
				t.Errorf("%d %s: %v (class %v), want %v", tc.status, tc.body, err, sandbox.ClassOf(err), tc.want)
			}
		})
	}
}

// Options are checked before anything is sent; URLs are not quoted back.
func TestOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		o    e2b.Options
		want sandbox.Class
	}{
		{"no key", e2b.Options{}, sandbox.Unauthenticated},
		{"blank key", e2b.Options{APIKey: registry.Secret("  ")}, sandbox.Unauthenticated},
		{"key with a newline", e2b.Options{APIKey: registry.Secret("k\nX-Evil: 1")}, sandbox.InvalidArgument},
		{"api url", e2b.Options{APIKey: registry.Secret("k"), APIURL: "ftp://user:pw@host"}, sandbox.InvalidArgument},
		{"sandbox url", e2b.Options{APIKey: registry.Secret("k"), SandboxURL: "https://user:pw@"}, sandbox.InvalidArgument},
		{"domain", e2b.Options{APIKey: registry.Secret("k"), Domain: "evil.test/x?"}, sandbox.InvalidArgument},
	} {
		d, err := e2b.New(tc.o)
		if err == nil {
			d.Close()
		}
		if sandbox.ClassOf(err) != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "pw") {
			t.Errorf("%s: the error quotes the URL: %v", tc.name, err)
		}
	}
}
