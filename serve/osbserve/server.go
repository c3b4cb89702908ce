package osbserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/serve/internal/core"
	"github.com/berth-sh/berth/serve/opensandbox"
)

// The OpenSandbox API shares the listener with the E2B API: its lifecycle
// routes are under /v1/ (which E2B's API does not use) and its proxy routes
// under /sandboxes/{id}/proxy/{port}/ (a path E2B's API has not either), so
// a client's OPENSANDBOX_DOMAIN is the same host:port as its E2B_API_URL,
// one key file serves both, and one key's sandboxes are one pool: the same
// per-key limits, TTL enforcement and shutdown apply.

// osbProxyPath matches the proxy routes, with or without upstream's /v1.
var osbProxyPath = regexp.MustCompile(`^(/v1)?/sandboxes/[^/]+/proxy/`)

// osbReadyWait is how long a create, and a proxied call to a Pending
// sandbox, wait for the sandbox to be Running before answering anyway.
const osbReadyWait = 20 * time.Second

// Server is the OpenSandbox API of a core.Server. It is an http.Handler
// of the calls Match tells apart; Close stops the creates in flight.
type Server struct {
	c         *core.Server
	opts      *core.Options
	log       *slog.Logger
	p         *sandbox.Provider
	caps      sandbox.Capabilities
	m         *core.Metrics
	h         http.Handler
	readyWait time.Duration

	life context.Context // ends at close: creates in flight stop
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu      sync.Mutex
	byID    map[string]*instance
	budgets map[string]*opensandbox.LogBudget // by key: the output its sandboxes' execds keep
}

// portCredentials are what the API's clients hold for a sandbox: the
// owner's key and the execd token open its ports too.
var portCredentials = &core.PortCredentials{KeyHeader: opensandbox.APIKeyHeader, TokenHeader: opensandbox.AccessTokenHeader}

// New builds the OpenSandbox API over c. With Options.OpenSandbox.Disabled
// it matches no call; its credentials still never reach a sandbox's ports.
func New(c *core.Server) *Server {
	o := &Server{c: c, opts: c.Options(), log: c.Logger(), p: c.Provider(), caps: c.Capabilities(), m: c.Metrics(),
		readyWait: osbReadyWait, byID: map[string]*instance{}, budgets: map[string]*opensandbox.LogBudget{}}
	c.AddPortCredentials(portCredentials)
	o.life, o.stop = context.WithCancel(context.Background())
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes", o.keyed(o.create))
	mux.HandleFunc("GET /v1/sandboxes", o.keyed(o.list))
	mux.HandleFunc("GET /v1/sandboxes/{id}", o.keyed(o.get))
	mux.HandleFunc("DELETE /v1/sandboxes/{id}", o.keyed(o.delete))
	mux.HandleFunc("GET /v1/sandboxes/{id}/endpoints/{port}", o.keyed(o.endpoint))
	mux.HandleFunc("POST /v1/sandboxes/{id}/renew-expiration", o.keyed(o.renew))
	// The SDKs report create latency here; it is read and dropped.
	mux.HandleFunc("POST /v1/metrics/events", o.keyed(func(w http.ResponseWriter, r *http.Request, _ string) {
		_, _ = io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, o.opts.MaxBodyBytes))
		w.WriteHeader(http.StatusNoContent)
	}))
	for _, p := range []string{"/sandboxes/{id}/proxy/{port}/{path...}", "/v1/sandboxes/{id}/proxy/{port}/{path...}"} {
		mux.HandleFunc(p, o.proxy)
	}
	for p, what := range map[string]string{
		"/v1/sandboxes/{id}/pause": "pausing a sandbox", "/v1/sandboxes/{id}/resume": "resuming a sandbox",
		"/v1/sandboxes/{id}/metadata": "changing a sandbox's metadata", "/v1/sandboxes/{id}/snapshots": "snapshots",
		"/v1/snapshots/": "snapshots", "/v1/pools/": "pools",
	} {
		mux.HandleFunc(p, o.keyed(func(w http.ResponseWriter, r *http.Request, _ string) {
			opensandbox.WriteError(w, http.StatusNotImplemented, opensandbox.CodeNotSupported, what+" is not supported by berth serve")
		}))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		opensandbox.WriteError(w, http.StatusNotFound, opensandbox.CodeNotFound, fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
	})
	o.h = c.Observe("opensandbox", core.ControlRoute, mux)
	return o
}

// match tells the OpenSandbox API's calls apart from the E2B API'o.
// Match tells the OpenSandbox API's calls apart from the E2B API's (none
// when the API is off).
func (o *Server) Match(r *http.Request) bool {
	return !o.opts.OpenSandbox.Disabled && (strings.HasPrefix(r.URL.Path, "/v1/") || osbProxyPath.MatchString(r.URL.Path))
}

func (o *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { o.h.ServeHTTP(w, r) }

// Close stops the creates in flight and waits for them; each deletes what
// it made. Call it before the core.Server's Close.
func (o *Server) Close() {
	o.stop()
	o.wg.Wait()
}

// budget is the key's bound on kept command output, shared by its
// sandboxes; one per key of the key file, kept for the server's life.
func (o *Server) budget(keyID string) *opensandbox.LogBudget {
	o.mu.Lock()
	defer o.mu.Unlock()
	b := o.budgets[keyID]
	if b == nil {
		b = opensandbox.NewLogBudget(o.opts.OpenSandbox.MaxLogBytesPerKey)
		o.budgets[keyID] = b
	}
	return b
}

// keyID checks OPEN-SANDBOX-API-KEY; on failure it has answered 401.
func (o *Server) keyID(w http.ResponseWriter, r *http.Request) (string, bool) {
	key := r.Header.Get(opensandbox.APIKeyHeader)
	if key == "" {
		o.m.AuthFails.WithLabelValues("opensandbox").Inc()
		opensandbox.WriteError(w, http.StatusUnauthorized, opensandbox.CodeMissingAPIKey, "missing API key: send a key of this server as "+opensandbox.APIKeyHeader)
		return "", false
	}
	id, ok := o.opts.Keys.Check(key)
	if !ok {
		o.m.AuthFails.WithLabelValues("opensandbox").Inc()
		opensandbox.WriteError(w, http.StatusUnauthorized, opensandbox.CodeInvalidAPIKey, "invalid API key")
		return "", false
	}
	return id, true
}

func (o *Server) keyed(f func(w http.ResponseWriter, r *http.Request, keyID string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if id, ok := o.keyID(w, r); ok {
			f(w, r, id)
		}
	}
}

// owned returns the key's sandbox named by the path; another key's is as
// unknown as a missing one (404).
func (o *Server) owned(w http.ResponseWriter, r *http.Request, keyID string) *instance {
	id := r.PathValue("id")
	o.mu.Lock()
	b := o.byID[id]
	o.mu.Unlock()
	if b == nil || b.keyID != keyID {
		opensandbox.WriteError(w, http.StatusNotFound, opensandbox.CodeNotFound, fmt.Sprintf("sandbox %q not found", id))
		return nil
	}
	return b
}

// readJSON decodes a bounded body; false means it has answered.
func (o *Server) readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, o.opts.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			opensandbox.WriteError(w, http.StatusRequestEntityTooLarge, opensandbox.CodeTooLarge, fmt.Sprintf("request body is over the %d-byte limit", o.opts.MaxBodyBytes))
			return false
		}
		opensandbox.WriteError(w, http.StatusBadRequest, opensandbox.CodeInvalidParameter, "reading the request body: "+err.Error())
		return false
	}
	if err := json.Unmarshal(body, v); err != nil {
		opensandbox.WriteError(w, http.StatusBadRequest, opensandbox.CodeInvalidParameter, "request body is not valid JSON for this call: "+err.Error())
		return false
	}
	return true
}

func (o *Server) create(w http.ResponseWriter, r *http.Request, keyID string) {
	var req opensandbox.CreateRequest
	if !o.readJSON(w, r, &req) {
		return
	}
	id := core.NewID()
	c, err := o.spec(&req, id)
	if err != nil {
		o.m.Creates.WithLabelValues("refused").Inc()
		writeOSBClassed(w, err)
		return
	}
	if over := o.c.Reserve(keyID, c.spec.Resources); over != "" {
		o.m.RateLimited.Inc()
		o.m.Creates.WithLabelValues("refused").Inc()
		w.Header().Set("Retry-After", sandbox.RetryAfterHeader(o.c.RetryAfter(keyID)))
		opensandbox.WriteError(w, http.StatusTooManyRequests, opensandbox.CodeQuota, "a sandbox more would give this API key "+over+"; delete one or wait")
		return
	}
	b := o.start(keyID, &req, c, id)
	waitReady(r.Context(), b, o.readyWait)
	out := o.sandboxJSON(b)
	out.Image = nil // the create answer leaves the startup source out
	w.Header().Set("Location", "/v1/sandboxes/"+id)
	opensandbox.WriteJSON(w, http.StatusAccepted, out)
}

// sandboxJSON is b as the Sandbox schema; a Running sandbox's end is its
// record's (SetTimeout and renew move it).
func (o *Server) sandboxJSON(b *instance) opensandbox.Sandbox {
	state, reason, message, at, _ := b.snapshot()
	at = at.UTC()
	expires := b.createdAt.Add(b.ttl).UTC()
	if rec := o.c.Get(b.id); rec != nil && state == opensandbox.StateRunning {
		expires = rec.Deadline().UTC()
	}
	entry := b.entrypoint
	if entry == nil {
		entry = []string{}
	}
	return opensandbox.Sandbox{ID: b.id, Image: &opensandbox.ImageSpec{URI: b.image},
		Status:   opensandbox.Status{State: state, Reason: reason, Message: message, LastTransitionAt: &at},
		Metadata: b.metadata, Extensions: b.extensions, Entrypoint: entry, ExpiresAt: &expires, CreatedAt: b.createdAt.UTC()}
}

func (o *Server) get(w http.ResponseWriter, r *http.Request, keyID string) {
	if b := o.owned(w, r, keyID); b != nil {
		opensandbox.WriteJSON(w, http.StatusOK, o.sandboxJSON(b))
	}
}

// delete answers 204 for a sandbox of the key in any state: a Pending one
// stops being created, a Failed one is forgotten.
func (o *Server) delete(w http.ResponseWriter, r *http.Request, keyID string) {
	b := o.owned(w, r, keyID)
	if b == nil {
		return
	}
	if o.cancelPending(b) {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if state, _, _, _, _ := b.snapshot(); state == opensandbox.StateFailed {
		o.forget(b)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if err := o.c.Delete(r.Context(), b.id, "api"); err != nil {
		if sandbox.ClassOf(err) == sandbox.NotFound {
			opensandbox.WriteError(w, http.StatusNotFound, opensandbox.CodeNotFound, fmt.Sprintf("sandbox %q not found", b.id))
			return
		}
		writeOSBClassed(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// list answers the key's sandboxes, oldest first, filtered by state (any of
// ?state=, case-insensitive) and metadata (?metadata=k=v&k2=v2, encoded),
// a page at a time (?page= from 1, ?pageSize= up to 200).
func (o *Server) list(w http.ResponseWriter, r *http.Request, keyID string) {
	q := r.URL.Query()
	md, err := core.ParseMetadata(q.Get("metadata"))
	page, perr := positive(q.Get("page"), 1, 1<<20)
	size, serr := positive(q.Get("pageSize"), 20, 200)
	if err = errors.Join(err, perr, serr); err != nil {
		opensandbox.WriteError(w, http.StatusBadRequest, opensandbox.CodeInvalidParameter, err.Error())
		return
	}
	states := osbStates(q["state"])
	o.mu.Lock()
	var mine []*instance
	for _, b := range o.byID {
		if b.keyID == keyID && sandbox.MatchLabels(b.metadata, md) {
			mine = append(mine, b)
		}
	}
	o.mu.Unlock()
	items := []opensandbox.Sandbox{}
	for _, b := range mine {
		if sb := o.sandboxJSON(b); states == nil || states[sb.Status.State] {
			items = append(items, sb)
		}
	}
	slices.SortFunc(items, func(a, b opensandbox.Sandbox) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	total := len(items)
	lo, hi := min((page-1)*size, total), min(page*size, total)
	opensandbox.WriteJSON(w, http.StatusOK, opensandbox.ListResponse{Items: items[lo:hi], Pagination: opensandbox.Pagination{
		Page: page, PageSize: size, TotalItems: total, TotalPages: (total + size - 1) / size, HasNextPage: hi < total}})
}

func positive(raw string, def, most int) (int, error) {
	if raw == "" {
		return def, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 || n > most {
		return 0, fmt.Errorf("%q is not a number from 1 to %d", raw, most)
	}
	return n, nil
}

// osbStates is the list's state filter; nil takes every state.
func osbStates(raw []string) map[string]bool {
	if len(raw) == 0 {
		return nil
	}
	out := map[string]bool{}
	for _, st := range raw {
		for _, k := range []string{opensandbox.StatePending, opensandbox.StateRunning, opensandbox.StateFailed} {
			if strings.EqualFold(k, st) {
				out[k] = true
			}
		}
	}
	return out
}

// endpoint answers where execd (44772) and the egress API (18080) of a
// sandbox are reached: always this server's proxy path (berth's sandboxes
// are not reachable directly), with the execd access token as a header the
// SDKs send on every call there.
func (o *Server) endpoint(w http.ResponseWriter, r *http.Request, keyID string) {
	b := o.owned(w, r, keyID)
	if b == nil {
		return
	}
	if r.URL.Query().Get("expires") != "" {
		opensandbox.WriteError(w, http.StatusBadRequest, opensandbox.CodeInvalidParameter, "signed endpoints (expires) are not supported by berth serve; use use_server_proxy=true")
		return
	}
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil || (port != opensandbox.ExecdPort && port != opensandbox.EgressPort) {
		opensandbox.WriteError(w, http.StatusNotFound, opensandbox.CodeNotFound,
			fmt.Sprintf("port %s of sandbox %s is not served: berth serve serves execd (%d) and the egress API (%d)", r.PathValue("port"), b.id, opensandbox.ExecdPort, opensandbox.EgressPort))
		return
	}
	host := o.opts.OpenSandbox.EndpointHost
	if host == "" {
		host = r.Host
	}
	opensandbox.WriteJSON(w, http.StatusOK, opensandbox.Endpoint{
		Endpoint: fmt.Sprintf("%s/sandboxes/%s/proxy/%d", strings.TrimSuffix(host, "/"), b.id, port),
		Headers:  map[string]string{opensandbox.AccessTokenHeader: b.token},
	})
}

// renew moves a Running sandbox's end to expiresAt, which must be later
// than its end now and within the server's maximum timeout from now.
func (o *Server) renew(w http.ResponseWriter, r *http.Request, keyID string) {
	b := o.owned(w, r, keyID)
	if b == nil {
		return
	}
	var req opensandbox.RenewRequest
	if !o.readJSON(w, r, &req) {
		return
	}
	rec := o.c.Get(b.id)
	if state, _, _, _, _ := b.snapshot(); state != opensandbox.StateRunning || rec == nil {
		opensandbox.WriteError(w, http.StatusConflict, opensandbox.CodeInvalidParameter, fmt.Sprintf("sandbox %s is %s, not Running", b.id, state))
		return
	}
	d := time.Until(req.ExpiresAt)
	switch {
	case !req.ExpiresAt.After(rec.Deadline()):
		opensandbox.WriteError(w, http.StatusBadRequest, opensandbox.CodeInvalidParameter, "expiresAt must be later than the sandbox's expiresAt now")
		return
	case d > o.opts.MaxTimeout:
		opensandbox.WriteError(w, http.StatusBadRequest, opensandbox.CodeInvalidParameter, fmt.Sprintf("expiresAt is more than this server's maximum timeout (%v) from now", o.opts.MaxTimeout))
		return
	}
	if err := o.c.Retime(r.Context(), rec, d, true); err != nil {
		writeOSBClassed(w, err)
		return
	}
	opensandbox.WriteJSON(w, http.StatusOK, opensandbox.RenewResponse{ExpiresAt: rec.Deadline().UTC()})
}
