package e2b

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
	"sync/atomic"
	"time"

	"github.com/berth-sh/berth/sandbox/types"
)

// api calls the control plane. It is safe for concurrent use.
type api struct {
	base    string
	key     Secret
	hc      *http.Client
	log     *slog.Logger
	retries int
	maxWait time.Duration
	// sleep waits out a throttle; tests may watch it.
	sleep func(ctx context.Context, d time.Duration) error

	// v1 remembers, per route family, a server that lacks the v2 route
	// (it answered 404 or 405 where v1 then worked).
	v1 [numFamilies]atomic.Bool
}

type family int

const (
	famCreate family = iota
	famConnect
	famList
	numFamilies
)

// sandboxJSON holds the Sandbox, SandboxDetail and ListedSandbox schemas
// at once; a field a schema lacks stays zero.
type sandboxJSON struct {
	SandboxID       string            `json:"sandboxID"`
	TemplateID      string            `json:"templateID"`
	Alias           string            `json:"alias,omitempty"`
	EnvdVersion     string            `json:"envdVersion,omitempty"`
	EnvdAccessToken string            `json:"envdAccessToken,omitempty"`
	Domain          *string           `json:"domain,omitempty"`
	State           string            `json:"state,omitempty"`
	StartedAt       time.Time         `json:"startedAt,omitzero"`
	EndAt           time.Time         `json:"endAt,omitzero"`
	Metadata        map[string]string `json:"metadata,omitempty"`
}

// createRequest is NewSandbox. Secure goes on v1 only: v2 dropped it.
type createRequest struct {
	TemplateID          string            `json:"templateID"`
	Timeout             int               `json:"timeout"`
	Secure              *bool             `json:"secure,omitempty"`
	AllowInternetAccess bool              `json:"allow_internet_access"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	EnvVars             map[string]string `json:"envVars,omitempty"`
}

type timeoutRequest struct {
	Timeout int `json:"timeout"`
}

// Bounds on what the driver reads from the control plane.
const (
	maxBody      = 16 << 20 // one answer
	maxErrorBody = 64 << 10 // one error answer
	maxPages     = 1000     // one List
	pageLimit    = 100      // the schema's maximum page size
)

// create makes a sandbox. A throttle comes back at once, with the server's
// Retry-After, for the caller's create gate to wait out.
func (a *api) create(ctx context.Context, req createRequest) (sandboxJSON, error) {
	var sb sandboxJSON
	v2 := func() error {
		r := req
		r.Secure = nil
		_, err := a.do(ctx, http.MethodPost, "/v2/sandboxes", nil, r, &sb, false)
		return err
	}
	v1 := func() error {
		r := req
		secure := true
		r.Secure = &secure
		_, err := a.do(ctx, http.MethodPost, "/sandboxes", nil, r, &sb, false)
		return err
	}
	err := a.either(famCreate, v2, v1)
	if err == nil && sb.SandboxID == "" {
		err = types.Errorf(types.Unavailable, "e2b create: the answer carries no sandboxID")
	}
	return sb, err
}

// connect resumes a paused sandbox or extends a running one's life to at
// least timeout seconds from now.
func (a *api) connect(ctx context.Context, id string, timeout int) (sandboxJSON, error) {
	var sb sandboxJSON
	body := timeoutRequest{Timeout: timeout}
	esc := url.PathEscape(id)
	err := a.either(famConnect,
		func() error {
			_, err := a.do(ctx, http.MethodPost, "/v2/sandboxes/"+esc+"/connect", nil, body, &sb, true)
			return err
		},
		func() error {
			_, err := a.do(ctx, http.MethodPost, "/sandboxes/"+esc+"/connect", nil, body, &sb, true)
			return err
		})
	return sb, err
}

func (a *api) get(ctx context.Context, id string) (sandboxJSON, error) {
	var sb sandboxJSON
	_, err := a.do(ctx, http.MethodGet, "/sandboxes/"+url.PathEscape(id), nil, nil, &sb, true)
	return sb, err
}

func (a *api) kill(ctx context.Context, id string) error {
	_, err := a.do(ctx, http.MethodDelete, "/sandboxes/"+url.PathEscape(id), nil, nil, nil, true)
	return err
}

func (a *api) setTimeout(ctx context.Context, id string, secs int) error {
	_, err := a.do(ctx, http.MethodPost, "/sandboxes/"+url.PathEscape(id)+"/timeout", nil, timeoutRequest{Timeout: secs}, nil, true)
	return err
}

// list returns the running and paused sandboxes whose metadata holds every
// pair of md, following X-Next-Token from page to page.
func (a *api) list(ctx context.Context, md map[string]string) ([]sandboxJSON, error) {
	q := url.Values{}
	if len(md) > 0 {
		inner := url.Values{}
		for k, v := range md {
			inner.Set(k, v)
		}
		q.Set("metadata", inner.Encode())
	}
	var all []sandboxJSON
	v2 := func() error {
		all = all[:0]
		q := cloneValues(q)
		q.Set("state", "running,paused")
		q.Set("limit", fmt.Sprint(pageLimit))
		seen := map[string]bool{}
		for range maxPages {
			var page []sandboxJSON
			h, err := a.do(ctx, http.MethodGet, "/v2/sandboxes", q, nil, &page, true)
			if err != nil {
				return err
			}
			all = append(all, page...)
			next := h.Get("X-Next-Token")
			if next == "" {
				return nil
			}
			if seen[next] {
				return types.Errorf(types.Unavailable, "e2b list: the server repeated a page token")
			}
			seen[next] = true
			q.Set("nextToken", next)
		}
		return types.Errorf(types.Unavailable, "e2b list: more than %d pages", maxPages)
	}
	v1 := func() error {
		all = all[:0]
		_, err := a.do(ctx, http.MethodGet, "/sandboxes", q, nil, &all, true)
		return err
	}
	if err := a.either(famList, v2, v1); err != nil {
		return nil, err
	}
	return all, nil
}

func cloneValues(v url.Values) url.Values {
	c := url.Values{}
	for k, vs := range v {
		c[k] = append([]string(nil), vs...)
	}
	return c
}

// either calls the v2 route, and the v1 route when the server lacks v2 (it
// answers 404 or 405). The choice is remembered once v1 gave an answer of
// its own, so a v2 404 that meant "no such sandbox" changes nothing.
func (a *api) either(f family, v2, v1 func() error) error {
	if a.v1[f].Load() {
		return v1()
	}
	err := v2()
	if !missingRoute(err) {
		return err
	}
	err = v1()
	if !missingRoute(err) {
		a.v1[f].Store(true)
	}
	return err
}

func missingRoute(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && (ae.Status == http.StatusNotFound || ae.Status == http.StatusMethodNotAllowed)
}

// do makes one call, and retries it on a throttle when retry is set, up to
// a.retries times, each after the server's Retry-After (else 0.5 s doubling)
// when that is at most a.maxWait. in is sent as JSON; a 2xx body is decoded
// into out when out is set.
func (a *api) do(ctx context.Context, method, path string, q url.Values, in, out any, retry bool) (http.Header, error) {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return nil, types.Errorf(types.InvalidArgument, "e2b %s %s: %w", method, path, err)
		}
	}
	target := a.base + path
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	for attempt := 0; ; attempt++ {
		h, err := a.once(ctx, method, target, body, out)
		var ae *APIError
		if err == nil || !retry || attempt >= a.retries || !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests {
			if err != nil {
				err = fmt.Errorf("e2b %s %s: %w", method, path, err)
			}
			return h, err
		}
		wait := ae.RetryAfter()
		if wait <= 0 {
			wait = 500 * time.Millisecond << attempt
		}
		if wait > a.maxWait {
			return h, fmt.Errorf("e2b %s %s: advised wait %v is over %v: %w", method, path, wait, a.maxWait, err)
		}
		a.log.Debug("e2b: throttled, retrying", "method", method, "path", path, "wait", wait)
		if serr := a.sleep(ctx, wait); serr != nil {
			return h, fmt.Errorf("e2b %s %s: %w", method, path, errors.Join(err, serr))
		}
	}
}

func (a *api) once(ctx context.Context, method, target string, body []byte, out any) (http.Header, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, types.Errorf(types.InvalidArgument, "%w", err)
	}
	req.Header.Set("X-API-KEY", a.key.Reveal())
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := a.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx) // a cancel stays unclassified
		}
		return nil, types.Errorf(types.Unavailable, "%w", err)
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
		ae := newAPIError(res, b, func(s string) string { return redact(s, a.key.Reveal()) })
		return res.Header, types.Classify(ae.class(), ae)
	}
	if out != nil && res.StatusCode != http.StatusNoContent {
		dec := json.NewDecoder(io.LimitReader(res.Body, maxBody))
		if err := dec.Decode(out); err != nil {
			return res.Header, types.Errorf(types.Unavailable, "reading the answer: %w", err)
		}
	}
	return res.Header, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
