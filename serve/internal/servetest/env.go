package servetest

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
	"github.com/berth-sh/berth/internal/testing/waitfor"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/internal/apikeys"
	"github.com/berth-sh/berth/serve/internal/core"
)

// The keys of the tests' key file.
const (
	TestKey  = "test_key_aaaaaaaaaaaaaaaaaaaaaaaa"
	OtherKey = "test_key_bbbbbbbbbbbbbbbbbbbbbbbb"
)

// SelfDomain as a test's Options.Domain becomes "localhost:PORT", PORT
// the test server's own: sandbox ports are then reached at
// <port>-<id>.localhost:PORT, as browsers and the SDKs' getHost name them.
const SelfDomain = "localhost:self"

// Options are the tests' server options over p, whose "base" template is
// baseImage: the two keys, and logs on stderr when BERTH_SERVE_TEST_LOG
// is set.
func Options(t testing.TB, p *sandbox.Provider, baseImage string) core.Options {
	t.Helper()
	keys, err := apikeys.New(TestKey, OtherKey)
	if err != nil {
		t.Fatal(err)
	}
	opts := core.Options{Provider: p, Keys: keys, BaseImage: baseImage}
	if os.Getenv("BERTH_SERVE_TEST_LOG") != "" {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return opts
}

// Env is a server under test: its provider, its core and its address.
type Env struct {
	T   testing.TB
	P   *sandbox.Provider
	C   *core.Server
	URL string

	closeAPI func()
}

// Start builds a core.Server over p whose "base" template is baseImage
// (Options, then mutate), the handler build makes of it (with what closes
// that handler's API), and an HTTP server in front, all closed at the
// test's end. A Domain of SelfDomain becomes the server's own.
func Start(t testing.TB, p *sandbox.Provider, baseImage string, mutate func(*core.Options), build func(c *core.Server) (http.Handler, func(), error)) *Env {
	t.Helper()
	opts := Options(t, p, baseImage)
	if mutate != nil {
		mutate(&opts)
	}
	hs := httptest.NewUnstartedServer(nil) // its listener is bound: SelfDomain can name its port
	if opts.Domain == SelfDomain {
		opts.Domain = "localhost:" + strconv.Itoa(hs.Listener.Addr().(*net.TCPAddr).Port)
	}
	c, err := core.New(opts)
	if err != nil {
		hs.Close()
		t.Fatal(err)
	}
	h, closeAPI, err := build(c)
	if err != nil {
		hs.Close()
		c.Close()
		t.Fatal(err)
	}
	hs.Config.Handler = h
	hs.Start()
	e := &Env{T: t, P: p, C: c, URL: hs.URL, closeAPI: closeAPI}
	t.Cleanup(func() {
		hs.Close()
		e.Close()
	})
	return e
}

// Close ends the server as its process's end does: the API, then the core.
// It may be called again.
func (e *Env) Close() error {
	if e.closeAPI != nil {
		e.closeAPI()
	}
	return e.C.Close()
}

// Response is one answer, read whole.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v, failing the test when it is not that.
func (r Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("body %q is not the JSON expected: %v", r.Body, err)
	}
}

// ErrorCode reads the E2B error body and checks its code matches the
// status.
func (r Response) ErrorCode(t testing.TB) (int, string) {
	t.Helper()
	var e e2bapi.Error
	r.JSON(t, &e)
	if e.Code != r.Status {
		t.Fatalf("error body code %d, status %d: %s", e.Code, r.Status, r.Body)
	}
	return e.Code, e.Message
}

// Call makes one HTTP request to the server with key as X-API-KEY (unless
// ""); body may be nil, a string, an io.Reader (sent chunked) or a value
// sent as JSON; a "Host" in hdr is the request's host.
func (e *Env) Call(method, path, key string, body any, hdr map[string]string) Response {
	e.T.Helper()
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
			e.T.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.URL+path, rd)
	if err != nil {
		e.T.Fatal(err)
	}
	if key != "" {
		req.Header.Set(e2bapi.APIKeyHeader, key)
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
		e.T.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.T.Fatal(err)
	}
	return Response{Status: res.StatusCode, Header: res.Header, Body: b}
}

// BackendGone reports whether no sandbox of the provider carries the
// server's id.
func (e *Env) BackendGone(id string) bool {
	infos, err := e.P.List(context.Background(), map[string]string{core.IDLabel: id})
	if err != nil {
		e.T.Fatal(err)
	}
	return len(infos) == 0
}

// Metrics is the server's /metrics text.
func (e *Env) Metrics() string {
	return string(e.Call("GET", "/metrics", "", nil, nil).Body)
}

// Eventually polls cond every 50 ms for up to 10 s.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitfor.Until(t, 10*time.Second, what, cond)
}

// FreePort is a port free on the host now: the fake backend's sandboxes
// share its network.
func FreePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// ReadAll drains r for the tests' raw calls.
func ReadAll(t testing.TB, r io.Reader) []byte {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// RefusedPull is what a client reads of a pull the guard refused.
const RefusedPull = "refused: the registry's address is not public"
