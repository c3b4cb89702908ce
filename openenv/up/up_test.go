package up_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/testing/nettest"
	"github.com/berth-sh/berth/internal/testing/testbin"
	"github.com/berth-sh/berth/openenv/up"
	"github.com/berth-sh/berth/providers/daytona"
	"github.com/berth-sh/berth/providers/daytona/daytonatest"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/sandbox"
)

func TestMain(m *testing.M) { testbin.Main(m) }

// daytonaProvider is the daytona driver against the in-process Daytona,
// whose signed preview URLs live previewTTL.
func daytonaProvider(t *testing.T, previewTTL time.Duration) (*daytonatest.Server, *sandbox.Provider) {
	t.Helper()
	if why := daytonatest.Available(); why != "" {
		t.Skip(why)
	}
	srv, err := daytonatest.New(daytonatest.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	d, err := daytona.New(daytona.Options{BaseURL: srv.URL(), APIKey: registry.Secret(srv.APIKey()), PreviewTTL: previewTTL})
	if err != nil {
		t.Fatal(err)
	}
	p := sandbox.NewProvider("daytona", d)
	t.Cleanup(func() { p.Close() })
	return srv, p
}

// envServer stages the test's env server at /envserver.
func envServer(t *testing.T) func(context.Context, *sandbox.Sandbox) error {
	t.Helper()
	bin, err := testbin.Static("envserver", "github.com/berth-sh/berth/openenv/up/internal/envserver")
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context, sb *sandbox.Sandbox) error {
		f, err := os.Open(bin)
		if err != nil {
			return err
		}
		defer f.Close()
		return sb.WriteFrom(ctx, "/envserver", f, 0o755)
	}
}

func get(ep sandbox.Endpoint, path string) (int, error) {
	req, err := http.NewRequest(http.MethodGet, ep.Join(path), nil)
	if err != nil {
		return 0, err
	}
	for k, v := range ep.Headers {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	res.Body.Close()
	return res.StatusCode, nil
}

// Start brings the server up behind Daytona's signed preview URL; Keep
// renews the URL before it expires (the first one is refused after its
// expiry, the renewed one answers) and re-arms the TTL past its first
// end; Close leaves no sandbox.
func TestStartKeepRenews(t *testing.T) {
	srv, p := daytonaProvider(t, 4*time.Second)
	port := nettest.FreePort(t)
	e, err := up.Start(t.Context(), up.Options{
		Provider: p, Spec: sandbox.Spec{Image: "busybox:1.36", TTL: 6 * time.Second}, Port: port,
		Command: "/envserver --addr 127.0.0.1:" + strconv.Itoa(port) + " --delay 300ms", Stage: envServer(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	first := e.Endpoint()
	if first.Expires.IsZero() {
		t.Fatalf("endpoint %+v: want a signed URL with an expiry", first)
	}
	var mu sync.Mutex
	var renewed []sandbox.Endpoint
	ctx, cancel := context.WithTimeout(t.Context(), 9*time.Second)
	defer cancel()
	if err := e.Keep(ctx, func(ep sandbox.Endpoint) { mu.Lock(); renewed = append(renewed, ep); mu.Unlock() }); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(renewed) == 0 || renewed[len(renewed)-1].URL == first.URL || e.Endpoint().URL != renewed[len(renewed)-1].URL {
		t.Fatalf("renewals %v of %v", renewed, first)
	}
	if code, err := get(first, "/health"); err == nil && code == http.StatusOK {
		t.Fatal("the first signed URL still answers past its expiry: the test proves nothing")
	}
	if code, err := get(e.Endpoint(), "/health"); err != nil || code != http.StatusOK {
		t.Fatalf("health through the renewed URL: %d %v", code, err)
	}
	// 9 s is past the 6 s TTL set at create: Keep re-armed it.
	if err := e.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	noneLive(t, srv)
}

// A failed start (staging, a server that never answers) deletes the
// sandbox and says why.
func TestStartFailuresLeaveNothing(t *testing.T) {
	srv, p := daytonaProvider(t, time.Hour)
	_, err := up.Start(t.Context(), up.Options{
		Provider: p, Spec: sandbox.Spec{Image: "busybox:1.36"}, Command: "true",
		Stage: func(context.Context, *sandbox.Sandbox) error { return errors.New("staging broke") },
	})
	if err == nil || !strings.Contains(err.Error(), "staging broke") {
		t.Fatalf("start with a failing stage: %v", err)
	}
	port := nettest.FreePort(t)
	_, err = up.Start(t.Context(), up.Options{
		Provider: p, Spec: sandbox.Spec{Image: "busybox:1.36"}, Port: port, Ready: 2 * time.Second,
		Command: "/envserver --addr 127.0.0.1:" + strconv.Itoa(port) + " --delay 1h", Stage: envServer(t),
	})
	if !errors.Is(err, sandbox.ErrDeadlineExceeded) || !strings.Contains(err.Error(), "envserver: listening") {
		t.Fatalf("start with a server never healthy: %v", err)
	}
	noneLive(t, srv)
}

// noneLive waits for the fake's destroys, which finish a moment after the
// call.
func noneLive(t *testing.T, srv *daytonatest.Server) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(srv.Live()) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("sandboxes left: %v", srv.Live())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
