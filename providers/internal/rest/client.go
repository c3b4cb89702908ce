package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/berth-sh/berth/sandbox/errdefs"
	"github.com/berth-sh/berth/sandbox/retry"
)

// Defaults of Options.
const (
	DefaultRetries      = 3
	DefaultMaxRetryWait = 30 * time.Second
	DefaultBackoffBase  = 250 * time.Millisecond
	DefaultBackoffMax   = 10 * time.Second
	DefaultMaxBody      = 32 << 20
	DefaultMaxErrorBody = 64 << 10
)

// maxMessage bounds the server's text kept in an error.
const maxMessage = 2000

// Options configure New.
type Options struct {
	// Name starts every error ("e2b", "daytona").
	Name string
	// HTTPClient is the base client: its Transport and Timeout are used,
	// its CheckRedirect is not (the client's own refuses other origins).
	// Nil means a transport of the client's own.
	HTTPClient *http.Client
	// Auth sets the credential on a request's header. It is called by the
	// transport for requests to an allowed origin only.
	Auth func(h http.Header)
	// Secrets returns the strings redacted from every error text (the
	// key, tokens); called when an error is made.
	Secrets func() []string
	// Origins are base URLs whose origin (scheme, host, port) may receive
	// the credential; AllowOrigin adds more later.
	Origins []string
	// Retries bounds the retries of one call; 0 means DefaultRetries and a
	// negative value none.
	Retries int
	// MaxRetryWait is the longest advised wait the client waits out
	// itself; a longer one returns the error. 0 means DefaultMaxRetryWait.
	MaxRetryWait time.Duration
	// BackoffBase and BackoffMax bound the wait when the server advised
	// none: base, doubled per retry, capped at max, jittered by half
	// (retry.Backoff).
	BackoffBase, BackoffMax time.Duration
	// MaxBody bounds a JSON answer; MaxErrorBody what is read of an error
	// answer. Zero means the defaults.
	MaxBody, MaxErrorBody int64
	// ErrorBody reads an error answer's body into a message and the
	// status code it names, if any (E2B's {"code","message"}); nil means
	// the trimmed text.
	ErrorBody func(body []byte) (message string, code int)
	// Logger receives one debug line per request (method, path, status,
	// duration); never headers or bodies. Nil discards.
	Logger *slog.Logger
	// Sleep waits between retries; nil means retry.Sleep. Tests watch it.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Client makes calls to one REST API. It is safe for concurrent use.
type Client struct {
	o     Options
	hc    *http.Client // the credential's client: auth transport, checked redirects
	plain *http.Client // no credential, checked redirects

	mu      sync.RWMutex
	origins map[string]bool
}

// New returns a client. An origin in o.Origins that is not an http(s) URL
// with a host is InvalidArgument.
func New(o Options) (*Client, error) {
	if o.Retries == 0 {
		o.Retries = DefaultRetries
	}
	if o.Retries < 0 {
		o.Retries = 0
	}
	if o.MaxRetryWait <= 0 {
		o.MaxRetryWait = DefaultMaxRetryWait
	}
	if o.BackoffBase <= 0 {
		o.BackoffBase = DefaultBackoffBase
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = DefaultBackoffMax
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.MaxErrorBody <= 0 {
		o.MaxErrorBody = DefaultMaxErrorBody
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Secrets == nil {
		o.Secrets = func() []string { return nil }
	}
	base := o.HTTPClient
	if base == nil {
		base = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	rt := base.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	c := &Client{o: o, origins: map[string]bool{}}
	c.hc = &http.Client{Transport: &authTransport{base: rt, c: c}, CheckRedirect: SameOrigin, Timeout: base.Timeout}
	c.plain = &http.Client{Transport: rt, CheckRedirect: SameOrigin, Timeout: base.Timeout}
	for _, u := range o.Origins {
		if err := c.AllowOrigin(u); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// AllowOrigin lets the credential go to the origin of base too (Daytona's
// toolbox proxy, learnt from the API).
func (c *Client) AllowOrigin(base string) error {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errdefs.Errorf(errdefs.InvalidArgument, "%s: %s is not an http(s) URL with a host", c.o.Name, c.Redact(base))
	}
	c.mu.Lock()
	c.origins[origin(u)] = true
	c.mu.Unlock()
	return nil
}

func (c *Client) allowed(u *url.URL) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.origins[origin(u)]
}

// HTTPClient is the client that carries the credential, for calls the
// Call API cannot make (a WebSocket dial); its transport adds the
// credential to allowed origins only.
func (c *Client) HTTPClient() *http.Client { return c.hc }

// PlainClient carries no credential and refuses redirects to another
// origin, for calls that authenticate otherwise (a per-sandbox token) but
// must not take their headers elsewhere either.
func (c *Client) PlainClient() *http.Client { return c.plain }

// CloseIdleConnections releases the transport's idle connections.
// The authenticating wrapper has no such method, so it goes to the base
// transport, which both clients share.
func (c *Client) CloseIdleConnections() { c.plain.CloseIdleConnections() }

// origin is scheme://host:port, lower case, with the scheme's default port
// spelt out, so that https://h and https://h:443 are one origin.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443", "ws": "80", "wss": "443"}[u.Scheme]
	}
	scheme := u.Scheme
	switch scheme {
	case "ws":
		scheme = "http"
	case "wss":
		scheme = "https"
	}
	return strings.ToLower(scheme + "://" + u.Hostname() + ":" + port)
}

// SameOrigin is a CheckRedirect that follows a redirect only within the
// origin of the first request (at most 10), and refuses any other: the
// request's headers (a key, a token) would follow it there.
func SameOrigin(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errdefs.Errorf(errdefs.Unavailable, "stopped after 10 redirects")
	}
	if origin(req.URL) != origin(via[0].URL) {
		return errdefs.Errorf(errdefs.InvalidArgument, "refusing a redirect from %s to another origin (%s): the credential would go with it",
			via[0].URL.Host, req.URL.Host)
	}
	return nil
}

// authTransport adds the credential to requests for allowed origins.
type authTransport struct {
	base http.RoundTripper
	c    *Client
}

func (t *authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.c.o.Auth != nil && t.c.allowed(r.URL) {
		r = r.Clone(r.Context()) // a RoundTripper must not change its request
		t.c.o.Auth(r.Header)
	}
	return t.base.RoundTrip(r)
}

// Call is one request.
type Call struct {
	Method string
	URL    string     // absolute, without the query
	Query  url.Values // may be nil
	// JSON is sent as the body, when not nil.
	JSON any
	// Body makes a raw body for each attempt; ContentType is its type.
	Body        func() (io.Reader, error)
	ContentType string
	Header      http.Header
	// Once: the body cannot be sent twice, so the call is never retried.
	Once bool
	// NoRetry hands a retryable failure back at once, for a caller that
	// waits it out itself (a create, whose throttle the create gate
	// honours).
	NoRetry bool
}

// idempotent methods may be sent again after a failure that says nothing
// of whether the server acted (a dropped connection, a 503).
func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete, http.MethodOptions:
		return true
	}
	return false
}

// Send performs cl and returns a 2xx response, whose body the caller
// closes. Failures are retried when their class is retryable
// (errdefs.Retryable: a throttle, a transient outage; an Unavailable only
// for idempotent methods, since the server may have acted), after the
// advised wait or a backoff, at most Options.Retries times.
func (c *Client) Send(ctx context.Context, cl Call) (*http.Response, error) {
	var payload []byte
	if cl.JSON != nil {
		var err error
		if payload, err = json.Marshal(cl.JSON); err != nil {
			return nil, errdefs.Errorf(errdefs.InvalidArgument, "%s: encoding %s %s: %w", c.o.Name, cl.Method, pathOf(cl.URL), err)
		}
	}
	target := cl.URL
	if len(cl.Query) > 0 {
		target += "?" + cl.Query.Encode()
	}
	return retry.Value(ctx, c.policy(cl), func(ctx context.Context) (*http.Response, error) {
		return c.once(ctx, cl, target, payload)
	})
}

// policy is how cl is retried: on a retryable class, an Unavailable only
// for an idempotent method (the server may have acted), never for Once
// or NoRetry; a server's advice is waited out up to MaxRetryWait.
func (c *Client) policy(cl Call) retry.Policy {
	attempts := c.o.Retries + 1
	if cl.Once || cl.NoRetry {
		attempts = 1
	}
	return retry.Policy{
		Attempts: attempts, Base: c.o.BackoffBase, Max: c.o.BackoffMax, MaxAdvised: c.o.MaxRetryWait,
		Retryable: func(err error) bool {
			return errdefs.Retryable(err) && (errdefs.ClassOf(err) != errdefs.Unavailable || idempotent(cl.Method))
		},
		OnRetry: func(err error, _ int, wait time.Duration) {
			c.o.Logger.Debug(c.o.Name+": retrying", "method", cl.Method, "path", pathOf(cl.URL), "class", errdefs.ClassOf(err), "wait", wait)
		},
		Sleep: c.o.Sleep,
	}
}

func (c *Client) once(ctx context.Context, cl Call, target string, payload []byte) (*http.Response, error) {
	var body io.Reader
	switch {
	case payload != nil:
		body = bytes.NewReader(payload)
	case cl.Body != nil:
		var err error
		if body, err = cl.Body(); err != nil {
			return nil, err
		}
	}
	path := pathOf(cl.URL)
	req, err := http.NewRequestWithContext(ctx, cl.Method, target, body)
	if err != nil {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "%s API: %s %s: %s", c.o.Name, cl.Method, path, c.Redact(err.Error()))
	}
	for k, vs := range cl.Header {
		req.Header[k] = vs
	}
	switch {
	case payload != nil:
		req.Header.Set("Content-Type", "application/json")
	case cl.ContentType != "":
		req.Header.Set("Content-Type", cl.ContentType)
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json")
	}
	start := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			// A cancel stays unclassified; a deadline is DeadlineExceeded.
			return nil, fmt.Errorf("%s API: %s %s: %w", c.o.Name, cl.Method, path, context.Cause(ctx))
		}
		cause := c.Scrub(err)
		if errdefs.ClassOf(err) != errdefs.Unknown { // a refused redirect
			return nil, fmt.Errorf("%s API: %s %s: %w", c.o.Name, cl.Method, path, cause)
		}
		return nil, errdefs.Errorf(errdefs.Unavailable, "%s API: %s %s: %w", c.o.Name, cl.Method, path, cause)
	}
	c.o.Logger.Debug(c.o.Name+" request", "method", cl.Method, "path", path, "status", resp.StatusCode, "duration", time.Since(start))
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	return nil, c.errorOf(resp, cl.Method, path)
}

// errorOf reads a failed answer into a classed error.
func (c *Client) errorOf(resp *http.Response, method, path string) error {
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, c.o.MaxErrorBody))
	ae := &APIError{Name: c.o.Name, Status: resp.StatusCode, Method: method, Path: path}
	if c.o.ErrorBody != nil {
		ae.Message, ae.Code = c.o.ErrorBody(body)
	} else {
		ae.Message = strings.TrimSpace(string(body))
	}
	ae.Message = c.Redact(ae.Message)
	if len(ae.Message) > maxMessage {
		ae.Message = ae.Message[:maxMessage] + " ..."
	}
	wait, throttler := retryAfter(resp.Header, time.Now())
	ae.Throttler = throttler
	err := errdefs.HTTPError(resp.StatusCode, nil, ae).(*errdefs.Error)
	err.RetryAfter = wait
	if ae.Code == http.StatusNotFound {
		// A server that says "not found" in its body on a route whose
		// status says something else (E2B does) is believed.
		err.Class = errdefs.NotFound
	}
	return err
}

// retryAfter reads Retry-After and every Retry-After-<throttler> header
// (Daytona names its rate limiters so) and returns the longest wait and
// the throttler that asked for it ("" for plain Retry-After).
func retryAfter(h http.Header, now time.Time) (time.Duration, string) {
	var wait time.Duration
	var throttler string
	for k, vs := range h {
		name, ok := strings.CutPrefix(http.CanonicalHeaderKey(k), "Retry-After")
		if !ok || len(vs) == 0 || (name != "" && name[0] != '-') {
			continue
		}
		if d := errdefs.ParseRetryAfter(vs[0], now); d > wait {
			wait, throttler = d, strings.ToLower(strings.TrimPrefix(name, "-"))
		}
	}
	return wait, throttler
}

// Do sends cl and decodes a JSON answer into out (nil discards it),
// reading at most Options.MaxBody. It returns the answer's header.
func (c *Client) Do(ctx context.Context, cl Call, out any) (http.Header, error) {
	resp, err := c.Send(ctx, cl)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if out == nil || resp.StatusCode == http.StatusNoContent {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, c.o.MaxBody))
		return resp.Header, nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, c.o.MaxBody)).Decode(out); err != nil {
		return resp.Header, errdefs.Errorf(errdefs.Unavailable, "%s API: %s %s: decoding the answer: %w", c.o.Name, cl.Method, pathOf(cl.URL), c.Scrub(err))
	}
	return resp.Header, nil
}

func pathOf(u string) string {
	if p, err := url.Parse(u); err == nil {
		return p.EscapedPath()
	}
	return "(unparsable URL)"
}

// APIError is a non-2xx answer: the cause inside the classed errors the
// client returns; errors.As finds it.
type APIError struct {
	Name    string // the API ("e2b", "daytona")
	Status  int    // HTTP status
	Method  string // request method
	Path    string // request path, without the query
	Code    int    // the status the body named, 0 when none
	Message string // the server's message, redacted and bounded
	// Throttler names the rate limiter whose Retry-After-<throttler>
	// advised the wait ("sandbox-create"), when one did.
	Throttler string
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("%s API: %s %s: %d %s", e.Name, e.Method, e.Path, e.Status, http.StatusText(e.Status))
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.Throttler != "" {
		msg += " (throttler " + e.Throttler + ")"
	}
	return msg
}

// StatusOf returns the HTTP status of the answer behind err, or 0.
func StatusOf(err error) int {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}
