package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/internal/testing/fakeprovider"
	"github.com/berth-sh/berth/internal/testing/harbortest"
	"github.com/berth-sh/berth/internal/testing/localtest"
	"github.com/berth-sh/berth/internal/testing/waitfor"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/serve/apikeys"
)

const (
	testKey  = "test_key_aaaaaaaaaaaaaaaaaaaaaaaa"
	otherKey = "test_key_bbbbbbbbbbbbbbbbbbbbbbbb"
)

// bashProvider gives every fake sandbox a /bin/bash.
type bashProvider struct{ driver.Provider }

func (p bashProvider) Create(ctx context.Context, spec driver.Spec) (driver.Sandbox, error) {
	sb, err := p.Provider.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	if err := sb.WriteFile(ctx, "/bin/bash", strings.NewReader(localtest.BashScript), 0o755); err != nil {
		_ = sb.Delete(ctx)
		return nil, err
	}
	return sb, nil
}

// openFake opens the fake provider (chroot busybox sandboxes), wrapped.
func openFake(t testing.TB, wrap func(driver.Provider) driver.Provider) *sandbox.Provider {
	t.Helper()
	opts := fakeprovider.Options{StateDir: t.TempDir(), Busybox: harbortest.Busybox(t)}
	r := registry.New()
	r.Register(registry.Entry{
		Name:         "fake",
		Summary:      "fake provider (tests only)",
		DefaultImage: "host",
		Capabilities: func() sandbox.Capabilities { return fakeprovider.CapabilitiesOf(opts) },
		Open: func(context.Context, registry.Config) (driver.Provider, error) {
			d, err := fakeprovider.New(opts)
			if err != nil {
				return nil, err
			}
			d = bashProvider{d}
			if wrap != nil {
				d = wrap(d)
			}
			return d, nil
		},
	})
	p, err := r.Open(context.Background(), "fake", harbortest.Env(t), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

type testEnv struct {
	t   testing.TB
	s   *Server
	p   *sandbox.Provider
	url string
}

// newEnv starts a server over the fake provider on a real HTTP listener.
func newEnv(t testing.TB, mutate func(*Options), wrap func(driver.Provider) driver.Provider) *testEnv {
	t.Helper()
	return newEnvOver(t, openFake(t, wrap), "host", mutate)
}

// newEnvOver starts a server over p whose "base" template is baseImage.
func newEnvOver(t testing.TB, p *sandbox.Provider, baseImage string, mutate func(*Options)) *testEnv {
	t.Helper()
	keys, err := apikeys.New(testKey, otherKey)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Provider: p, Keys: keys, BaseImage: baseImage}
	if os.Getenv("BERTH_SERVE_TEST_LOG") != "" {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if mutate != nil {
		mutate(&opts)
	}
	hs := httptest.NewUnstartedServer(nil) // its listener is bound: selfDomain can name its port
	if opts.Domain == selfDomain {
		opts.Domain = "localhost:" + strconv.Itoa(hs.Listener.Addr().(*net.TCPAddr).Port)
	}
	s, err := New(opts)
	if err != nil {
		hs.Close()
		t.Fatal(err)
	}
	hs.Config.Handler = s
	hs.Start()
	t.Cleanup(func() {
		hs.Close()
		s.Close()
	})
	return &testEnv{t: t, s: s, p: p, url: hs.URL}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("body %q is not the JSON expected: %v", r.body, err)
	}
}

// errorCode reads the E2B error body and checks its code matches the status.
func (r response) errorCode(t testing.TB) (int, string) {
	t.Helper()
	var e e2bapi.Error
	r.json(t, &e)
	if e.Code != r.status {
		t.Fatalf("error body code %d, status %d: %s", e.Code, r.status, r.body)
	}
	return e.Code, e.Message
}

// call makes one HTTP request; body may be nil, a string or an io.Reader
// (sent chunked).
func (e *testEnv) call(method, path, key string, body any, hdr map[string]string) response {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case io.Reader:
		rd = b
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("X-API-KEY", key)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// create makes a sandbox with key and returns the create answer.
func (e *testEnv) create(key string, body any) e2bapi.Sandbox {
	e.t.Helper()
	r := e.call("POST", "/v2/sandboxes", key, body, nil)
	if r.status != http.StatusCreated {
		e.t.Fatalf("create: %d %s", r.status, r.body)
	}
	var sb e2bapi.Sandbox
	r.json(e.t, &sb)
	return sb
}

// headerTransport adds headers to every request, as the SDKs do.
type headerTransport struct {
	rt http.RoundTripper
	h  map[string]string
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header.Set(k, v)
	}
	return t.rt.RoundTrip(r)
}

// envdClient is berth's own envd client pointed at a sandbox through the
// server, routed by E2b-Sandbox-Id as SDKs >= 2.7 do.
func (e *testEnv) envdClient(sb e2bapi.Sandbox) *envd.Client {
	e.t.Helper()
	hc := &http.Client{Transport: headerTransport{rt: http.DefaultTransport, h: map[string]string{
		e2bapi.SandboxIDHeader: sb.SandboxID, e2bapi.SandboxPortHeader: e2bapi.EnvdPort,
	}}}
	c, err := envd.NewClient(e.url, hc, envd.WithAccessToken(sb.EnvdAccessToken), envd.WithKeepalive(0))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	return c
}

// eventually polls cond every 50 ms for up to 10 s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitfor.Until(t, 10*time.Second, what, cond)
}

// backendGone reports whether no sandbox of the provider carries the id.
func (e *testEnv) backendGone(id string) bool {
	infos, err := e.p.List(context.Background(), map[string]string{IDLabel: id})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(infos) == 0
}
