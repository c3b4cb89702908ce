package command

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path"
	"strings"
	"sync/atomic"

	"github.com/berth-sh/berth/internal/httpserve"
)

// Bounds on what one sandbox asks of the relay.
const (
	maxRequestBytes = 64 << 20 // one request body
	maxInFlight     = 64       // requests at once; more are answered 429
)

// relay carries a sandbox's model requests to the endpoint: it listens on
// this host's loopback (the sandbox reaches it through the reverse port),
// takes only requests that carry its token and ask for a path under /v1/,
// and sends them on with the endpoint's key in place of the token.
type relay struct {
	token    string
	base     *url.URL // the endpoint's OpenAI base URL (…/v1)
	key      string
	ln       net.Listener
	srv      *http.Server
	requests atomic.Int64
	slots    chan struct{}
}

// newRelay starts a relay to base (an OpenAI base URL ending in /v1).
func newRelay(base, key string, client *http.Client) (*relay, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &relay{token: "berth-relay-" + hex.EncodeToString(b[:]), base: u, key: key, ln: ln, slots: make(chan struct{}, maxInFlight)}
	rp := &httputil.ReverseProxy{
		Rewrite:       r.rewrite,
		FlushInterval: -1, // streamed replies (SSE) go out as they come
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			// The cause may name the endpoint; the sandbox learns only that it failed.
			code := http.StatusBadGateway
			if errors.Is(err, context.DeadlineExceeded) {
				code = http.StatusGatewayTimeout
			}
			http.Error(w, "berth relay: the model endpoint did not answer", code)
		},
	}
	if client != nil && client.Transport != nil {
		rp.Transport = client.Transport
	}
	r.srv = httpserve.Start(ln, r.guard(rp), 0) // bodies stream: no read timeout
	return r, nil
}

// addr is the relay's host:port on loopback.
func (r *relay) addr() string { return r.ln.Addr().String() }

func (r *relay) close() error { return r.srv.Close() }

// guard refuses what the sandbox may not ask: a missing or wrong token, a
// path outside /v1/ or one that is not already clean (dot segments,
// escaped slashes: what could walk out of the endpoint's base).
func (r *relay) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		tok := req.Header.Get("X-Api-Key")
		if v, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer "); ok {
			tok = v
		}
		if subtle.ConstantTimeCompare([]byte(tok), []byte(r.token)) != 1 {
			http.Error(w, "berth relay: missing or wrong key", http.StatusUnauthorized)
			return
		}
		p := req.URL.Path
		if req.URL.RawPath != "" || !strings.HasPrefix(p, "/v1/") || path.Clean(p) != strings.TrimSuffix(p, "/") || strings.Contains(p, "//") {
			http.Error(w, "berth relay: only the model API under /v1/ is served", http.StatusForbidden)
			return
		}
		select {
		case r.slots <- struct{}{}:
			defer func() { <-r.slots }()
		default:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "berth relay: too many requests at once", http.StatusTooManyRequests)
			return
		}
		r.requests.Add(1)
		req.Body = http.MaxBytesReader(w, req.Body, maxRequestBytes)
		next.ServeHTTP(w, req)
	})
}

// rewrite maps /v1/REST onto the endpoint's base and swaps the token for
// the endpoint's key.
func (r *relay) rewrite(pr *httputil.ProxyRequest) {
	out := pr.Out
	rest := strings.TrimPrefix(pr.In.URL.Path, "/v1")
	out.URL.Scheme, out.URL.Host = r.base.Scheme, r.base.Host
	out.URL.Path = strings.TrimRight(r.base.Path, "/") + rest
	out.URL.RawPath = ""
	out.Host = ""
	out.Header.Del("Authorization")
	out.Header.Del("X-Api-Key")
	out.Header.Del("Cookie")
	if r.key != "" {
		out.Header.Set("Authorization", "Bearer "+r.key)
	}
}
