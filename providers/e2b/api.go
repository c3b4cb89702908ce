package e2b

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync/atomic"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/providers/internal/rest"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// api calls the control plane through the shared REST client, which
// carries the key (to the control plane's origin only), retries throttles
// and redacts the key from errors. It is safe for concurrent use.
type api struct {
	base string
	c    *rest.Client

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

// Bounds on what the driver reads from the control plane.
const (
	maxBody   = 16 << 20 // one answer
	maxPages  = 1000     // one List
	pageLimit = e2bapi.MaxPageLimit
)

// create makes a sandbox. A throttle comes back at once, with the server's
// Retry-After, for the caller's create gate to wait out.
// Secure goes on v1 only: v2 dropped it.
func (a *api) create(ctx context.Context, req e2bapi.NewSandbox) (e2bapi.Sandbox, error) {
	var sb e2bapi.Sandbox
	v2 := func() error {
		r := req
		r.Secure = nil
		_, err := a.do(ctx, rest.Call{Method: http.MethodPost, URL: a.base + e2bapi.RouteSandboxesV2, JSON: r, NoRetry: true}, &sb)
		return err
	}
	v1 := func() error {
		r := req
		r.Secure = e2bapi.Bool(true)
		_, err := a.do(ctx, rest.Call{Method: http.MethodPost, URL: a.base + e2bapi.RouteSandboxes, JSON: r, NoRetry: true}, &sb)
		return err
	}
	err := a.either(famCreate, v2, v1)
	if err == nil && sb.SandboxID == "" {
		err = errdefs.Errorf(errdefs.Unavailable, "e2b create: the answer carries no sandboxID")
	}
	return sb, err
}

// connect resumes a paused sandbox or extends a running one's life to at
// least timeout seconds from now.
func (a *api) connect(ctx context.Context, id string, timeout int64) (e2bapi.Sandbox, error) {
	var sb e2bapi.Sandbox
	body := e2bapi.ConnectSandbox{Timeout: &timeout}
	err := a.either(famConnect,
		func() error {
			_, err := a.do(ctx, rest.Call{Method: http.MethodPost, URL: a.base + e2bapi.Path(e2bapi.RouteConnectV2, id), JSON: body}, &sb)
			return err
		},
		func() error {
			_, err := a.do(ctx, rest.Call{Method: http.MethodPost, URL: a.base + e2bapi.Path(e2bapi.RouteConnect, id), JSON: body}, &sb)
			return err
		})
	return sb, err
}

func (a *api) get(ctx context.Context, id string) (e2bapi.SandboxDetail, error) {
	var sb e2bapi.SandboxDetail
	_, err := a.do(ctx, rest.Call{Method: http.MethodGet, URL: a.base + e2bapi.Path(e2bapi.RouteSandbox, id)}, &sb)
	return sb, err
}

func (a *api) kill(ctx context.Context, id string) error {
	_, err := a.do(ctx, rest.Call{Method: http.MethodDelete, URL: a.base + e2bapi.Path(e2bapi.RouteSandbox, id)}, nil)
	return err
}

func (a *api) setTimeout(ctx context.Context, id string, secs int64) error {
	_, err := a.do(ctx, rest.Call{Method: http.MethodPost, URL: a.base + e2bapi.Path(e2bapi.RouteTimeout, id), JSON: e2bapi.SandboxTimeout{Timeout: &secs}}, nil)
	return err
}

// list returns the running and paused sandboxes whose metadata holds every
// pair of md, following X-Next-Token from page to page.
func (a *api) list(ctx context.Context, md map[string]string) ([]e2bapi.ListedSandbox, error) {
	q := url.Values{}
	if len(md) > 0 {
		inner := url.Values{}
		for k, v := range md {
			inner.Set(k, v)
		}
		q.Set(e2bapi.QueryMetadata, inner.Encode())
	}
	var all []e2bapi.ListedSandbox
	v2 := func() error {
		all = all[:0]
		q := cloneValues(q)
		q.Set(e2bapi.QueryState, e2bapi.StateRunning+","+e2bapi.StatePaused)
		q.Set(e2bapi.QueryLimit, fmt.Sprint(pageLimit))
		seen := map[string]bool{}
		for range maxPages {
			var page []e2bapi.ListedSandbox
			h, err := a.do(ctx, rest.Call{Method: http.MethodGet, URL: a.base + e2bapi.RouteSandboxesV2, Query: q}, &page)
			if err != nil {
				return err
			}
			all = append(all, page...)
			next := h.Get(e2bapi.NextTokenHeader)
			if next == "" {
				return nil
			}
			if seen[next] {
				return errdefs.Errorf(errdefs.Unavailable, "e2b list: the server repeated a page token")
			}
			seen[next] = true
			q.Set(e2bapi.QueryNextToken, next)
		}
		return errdefs.Errorf(errdefs.Unavailable, "e2b list: more than %d pages", maxPages)
	}
	v1 := func() error {
		all = all[:0]
		_, err := a.do(ctx, rest.Call{Method: http.MethodGet, URL: a.base + e2bapi.RouteSandboxes, Query: q}, &all)
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
	st := rest.StatusOf(err)
	return st == http.StatusNotFound || st == http.StatusMethodNotAllowed
}

// do makes one call through the REST client.
func (a *api) do(ctx context.Context, cl rest.Call, out any) (http.Header, error) {
	return a.c.Do(ctx, cl, out)
}
