package envd

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is a server and a client talking over one transport.
type env struct {
	srv    *Server
	client *Client
	url    string
	hc     *http.Client
	ts     *httptest.Server // nil on unix
}

// transports runs f once over a unix socket and once over TCP.
func transports(t *testing.T, f func(t *testing.T, newEnv func(ServerOptions, ...ClientOption) *env)) {
	t.Run("unix", func(t *testing.T) {
		f(t, func(o ServerOptions, co ...ClientOption) *env { return unixEnv(t, o, co...) })
	})
	t.Run("tcp", func(t *testing.T) {
		f(t, func(o ServerOptions, co ...ClientOption) *env { return tcpEnv(t, o, co...) })
	})
}

func newServer(t testing.TB, o ServerOptions) *Server {
	t.Helper()
	srv, err := NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

func unixEnv(t testing.TB, o ServerOptions, co ...ClientOption) *env {
	t.Helper()
	srv := newServer(t, o)
	sock := filepath.Join(t.TempDir(), "envd.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	hc := UnixHTTPClient(sock)
	c, err := NewClient(UnixBaseURL, hc, co...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		_ = srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
		hc.CloseIdleConnections()
	})
	return &env{srv: srv, client: c, url: UnixBaseURL, hc: hc}
}

func tcpEnv(t testing.TB, o ServerOptions, co ...ClientOption) *env {
	t.Helper()
	srv := newServer(t, o)
	ts := httptest.NewServer(srv)
	hc := ts.Client()
	c, err := NewClient(ts.URL, hc, co...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		_ = srv.Close()
		ts.Close()
		hc.CloseIdleConnections()
	})
	return &env{srv: srv, client: c, url: ts.URL, hc: hc, ts: ts}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
