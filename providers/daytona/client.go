package daytona

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/berth-sh/berth/sandbox/types"
)

// Bounds on what the driver reads from a response it buffers.
const (
	maxErrorBody = 64 << 10
	maxJSONBody  = 32 << 20
)

// client sends authenticated requests to the REST API and the toolbox.
type client struct {
	base string // REST base URL, no trailing slash
	key  Secret // revealed only into the Authorization header

	hc      *http.Client
	log     *slog.Logger
	retries int // 429 retries of calls other than create
}

// call is one request.
type call struct {
	method string
	url    string     // absolute URL without the query
	query  url.Values // may be nil
	json   any        // JSON request body, when not nil
	// body makes a raw request body for each attempt; ctype is its type.
	body  func() (io.Reader, error)
	ctype string
	// once: the body cannot be sent twice, so nothing is retried.
	once bool
	// create: the sandbox create itself. A 429 goes back to the caller with
	// its advised wait, for the create gate to honour.
	create bool
	header http.Header
}

// send performs c, retrying a 429 (after the advised wait) and, for GETs,
// transient gateway errors. A non-2xx answer is a classed *APIError.
func (c *client) send(ctx context.Context, cl call) (*http.Response, error) {
	var payload []byte
	if cl.json != nil {
		var err error
		if payload, err = json.Marshal(cl.json); err != nil {
			return nil, types.Errorf(types.InvalidArgument, "daytona: encoding %s %s: %w", cl.method, pathOf(cl.url), err)
		}
	}
	u := cl.url
	if len(cl.query) > 0 {
		u += "?" + cl.query.Encode()
	}
	path := pathOf(cl.url)
	for attempt := 0; ; attempt++ {
		var body io.Reader
		switch {
		case payload != nil:
			body = bytes.NewReader(payload)
		case cl.body != nil:
			var err error
			if body, err = cl.body(); err != nil {
				return nil, err
			}
		}
		req, err := http.NewRequestWithContext(ctx, cl.method, u, body)
		if err != nil {
			return nil, types.Errorf(types.InvalidArgument, "daytona: %s %s: %w", cl.method, path, err)
		}
		for k, vs := range cl.header {
			req.Header[k] = vs
		}
		if payload != nil {
			req.Header.Set("Content-Type", "application/json")
		} else if cl.ctype != "" {
			req.Header.Set("Content-Type", cl.ctype)
		}
		req.Header.Set("Accept", "application/json")
		req.Header.Set("Authorization", "Bearer "+c.key.Reveal())
		start := time.Now()
		resp, err := c.hc.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("daytona API: %s %s: %w", cl.method, path, ctx.Err())
			}
			if cl.method == http.MethodGet && attempt < 2 {
				if werr := sleep(ctx, backoff(attempt)); werr == nil {
					continue
				}
			}
			return nil, types.Errorf(types.Unavailable, "daytona API: %s %s: %s", cl.method, path, redact(c.key, err.Error()))
		}
		c.log.Debug("daytona request", "method", cl.method, "path", path, "status", resp.StatusCode, "duration", time.Since(start))
		if resp.StatusCode < 300 {
			return resp, nil
		}
		apiErr := c.readError(resp, cl.method, path)
		retry := false
		switch {
		case resp.StatusCode == http.StatusTooManyRequests:
			retry = !cl.create && !cl.once && attempt < c.retries
		case resp.StatusCode == http.StatusBadGateway, resp.StatusCode == http.StatusServiceUnavailable, resp.StatusCode == http.StatusGatewayTimeout:
			retry = cl.method == http.MethodGet && attempt < 2
		}
		if !retry {
			return nil, classify(apiErr)
		}
		wait := apiErr.wait
		if wait <= 0 {
			wait = backoff(attempt)
		}
		c.log.Debug("daytona retry", "method", cl.method, "path", path, "status", apiErr.Status, "throttler", apiErr.Throttler, "wait", wait)
		if err := sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("%w (while waiting %v to retry: %w)", classify(apiErr), wait, err)
		}
	}
}

// do sends cl and decodes a JSON answer into out (nil discards it).
func (c *client) do(ctx context.Context, cl call, out any) error {
	resp, err := c.send(ctx, cl)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxJSONBody))
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxJSONBody)).Decode(out); err != nil {
		return types.Errorf(types.Unavailable, "daytona API: %s %s: decoding the answer: %w", cl.method, pathOf(cl.url), err)
	}
	return nil
}

func (c *client) readError(resp *http.Response, method, path string) *APIError {
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	msg := redact(c.key, messageOf(body))
	if len(msg) > 2000 {
		msg = msg[:2000] + " ..."
	}
	wait, throttler := retryAfter(resp.Header, time.Now())
	return &APIError{Status: resp.StatusCode, Method: method, Path: path, Message: msg, Throttler: throttler, wait: wait}
}

// api is the REST URL of path (which starts with "/").
func (c *client) api(path string) string { return c.base + path }

func pathOf(u string) string {
	if p, err := url.Parse(u); err == nil {
		return p.EscapedPath()
	}
	return u
}

// backoff is the wait before retry n (from 0) when the server advised none.
func backoff(n int) time.Duration {
	return min(time.Duration(250<<min(n, 6))*time.Millisecond, 10*time.Second)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
