package e2b_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/internal/testing/fakeengine"
)

// fakeE2B is a small E2B server for the driver's tests: the control-plane
// routes the driver calls, as the facts file describes them, and a data
// plane that routes by E2b-Sandbox-Id (or by Host) to a real envd.Server
// per sandbox. The sandboxes, their metadata and deadlines are
// internal/testing/fakeengine's; they expire at their deadline.
type fakeE2B struct {
	t    *testing.T
	key  string
	v2   string // "all", "list" (only GET /v2/sandboxes), "none"
	api  *httptest.Server
	data *httptest.Server

	eng       *fakeengine.Engine
	mu        sync.Mutex
	calls     []call   // every control-plane call
	hosts     []string // Host of every data-plane call routed by it
	bodies    map[string][]json.RawMessage
	throttle  int    // answer this many next calls 429
	retryHdr  string // their Retry-After
	throttled []time.Time
	echoKey   bool   // error messages quote the caller's key and token
	domain    string // the domain create and get answer; "" answers null
	noToken   bool   // get answers without envdAccessToken
	dropMode  bool   // /files uploads lose berth's ?mode=, as upstream envd ignores it
}

type call struct {
	what string // "METHOD path"
	at   time.Time
}

// fakeSandbox is the Value of an engine's sandbox of the same id: its
// metadata are the engine's labels, its times the engine's.
type fakeSandbox struct {
	id, template, token string
	traffic             string // the traffic access token; "" when ports are public
	srv                 *envd.Server
}

type fakeOptions struct {
	v2      string
	dataTLS bool   // serve the data plane over TLS, routed by Host
	domain  string // fakeE2B.domain
}

func newFake(t *testing.T, o fakeOptions) *fakeE2B {
	t.Helper()
	if o.v2 == "" {
		o.v2 = "all"
	}
	f := &fakeE2B{t: t, key: "e2b_" + randHex(16), v2: o.v2, domain: o.domain, bodies: map[string][]json.RawMessage{}}
	eng, err := fakeengine.New(fakeengine.Options{Dir: t.TempDir(), OnExpire: func(eb *fakeengine.Sandbox) { f.end(eb, fakeengine.Expired) }})
	if err != nil {
		t.Fatal(err)
	}
	f.eng = eng
	mux := http.NewServeMux()
	if f.v2 == "all" {
		mux.HandleFunc("POST "+e2bapi.RouteSandboxesV2, f.create)
		mux.HandleFunc("POST "+e2bapi.RouteConnectV2, f.connect)
	}
	if f.v2 == "all" || f.v2 == "list" {
		mux.HandleFunc("GET "+e2bapi.RouteSandboxesV2, f.list)
	}
	mux.HandleFunc("POST "+e2bapi.RouteSandboxes, f.create)
	mux.HandleFunc("GET "+e2bapi.RouteSandboxes, f.list)
	mux.HandleFunc("GET "+e2bapi.RouteSandbox, f.get)
	mux.HandleFunc("DELETE "+e2bapi.RouteSandbox, f.kill)
	mux.HandleFunc("POST "+e2bapi.RouteTimeout, f.timeout)
	mux.HandleFunc("POST "+e2bapi.RouteConnect, f.connect)
	f.api = httptest.NewServer(f.gate(mux))
	if o.dataTLS {
		f.data = httptest.NewTLSServer(http.HandlerFunc(f.route))
	} else {
		f.data = httptest.NewServer(http.HandlerFunc(f.route))
	}
	t.Cleanup(f.close)
	return f
}

func (f *fakeE2B) close() {
	f.api.Close()
	f.data.Close()
	for _, eb := range f.eng.List(nil) {
		f.end(eb, fakeengine.Closed)
	}
	f.eng.Close()
}

// end ends a sandbox and its envd.
func (f *fakeE2B) end(eb *fakeengine.Sandbox, why fakeengine.Reason) {
	_ = eb.End(why)
	eb.Value.(*fakeSandbox).srv.Close()
}

// sandbox is the live sandbox with id, nil when there is none.
func (f *fakeE2B) sandbox(id string) *fakeSandbox {
	eb, err := f.eng.Get(id)
	if err != nil {
		return nil
	}
	return eb.Value.(*fakeSandbox)
}

func randHex(n int) string { return fakeengine.RandomHex(n) }

// gate checks the key, records the call and answers throttles.
func (f *fakeE2B) gate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.calls = append(f.calls, call{r.Method + " " + r.URL.Path, time.Now()})
		throttle := f.throttle > 0
		if throttle {
			f.throttle--
			f.throttled = append(f.throttled, time.Now())
		}
		f.mu.Unlock()
		if got := r.Header.Get(e2bapi.APIKeyHeader); got != f.key {
			msg := "invalid API key"
			if f.echoKey {
				msg += " " + got
			}
			writeError(w, http.StatusUnauthorized, msg)
			return
		}
		if throttle {
			if f.retryHdr != "" {
				w.Header().Set("Retry-After", f.retryHdr)
			}
			writeError(w, http.StatusTooManyRequests, "rate limit exceeded")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, e2bapi.Error{Code: status, Message: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (f *fakeE2B) record(r *http.Request, v any) bool {
	var raw json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&raw); err != nil || json.Unmarshal(raw, v) != nil {
		return false
	}
	f.mu.Lock()
	f.bodies[r.Method+" "+r.URL.Path] = append(f.bodies[r.Method+" "+r.URL.Path], raw)
	f.mu.Unlock()
	return true
}

func (f *fakeE2B) create(w http.ResponseWriter, r *http.Request) {
	var req e2bapi.NewSandbox
	if !f.record(r, &req) || req.TemplateID == "" {
		writeError(w, http.StatusBadRequest, "templateID is required")
		return
	}
	if req.TemplateID != e2bapi.DefaultTemplate {
		writeError(w, http.StatusNotFound, "template '"+req.TemplateID+"' not found")
		return
	}
	timeout := int64(300)
	if req.Timeout != nil {
		timeout = *req.Timeout
	}
	if timeout <= 0 {
		writeError(w, http.StatusBadRequest, "timeout must be positive")
		return
	}
	env := os.Environ()
	for k, v := range req.EnvVars {
		env = append(env, k+"="+v)
	}
	sb := &fakeSandbox{id: "i" + randHex(8), template: req.TemplateID, token: "tok_" + randHex(16)}
	if req.Network != nil && req.Network.AllowPublicTraffic != nil && !*req.Network.AllowPublicTraffic {
		sb.traffic = "traffic_" + randHex(16)
	}
	srv, err := envd.NewServer(envd.ServerOptions{AccessToken: sb.token, Env: env})
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	sb.srv = srv
	if _, err := f.eng.Create(fakeengine.Spec{ID: sb.id, Labels: req.Metadata, TTL: time.Duration(timeout) * time.Second, Value: sb}); err != nil {
		srv.Close()
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusCreated, f.sandboxJSON(sb))
}

// sandboxJSON is the Sandbox answer of create and connect.
func (f *fakeE2B) sandboxJSON(sb *fakeSandbox) e2bapi.Sandbox {
	j := e2bapi.Sandbox{SandboxID: sb.id, TemplateID: sb.template, EnvdVersion: "0.6.0", EnvdAccessToken: sb.token, Domain: f.domainJSON()}
	if sb.traffic != "" {
		j.TrafficAccessToken = e2bapi.String(sb.traffic)
	}
	return j
}

// domainJSON is the domain the answers carry: null unless f.domain is set.
func (f *fakeE2B) domainJSON() *string {
	if f.domain == "" {
		return nil
	}
	return e2bapi.String(f.domain)
}

// listedJSON is the ListedSandbox answer of list.
func (f *fakeE2B) listedJSON(sb *fakeSandbox) e2bapi.ListedSandbox {
	eb := f.eng.Lookup(sb.id)
	return e2bapi.ListedSandbox{SandboxID: sb.id, TemplateID: sb.template, EnvdVersion: "0.6.0", StartedAt: eb.Created, EndAt: eb.Deadline(),
		State: e2bapi.StateRunning, Metadata: eb.Labels(), CPUCount: 2, MemoryMB: 512, DiskSizeMB: 1024}
}

func (f *fakeE2B) lookup(w http.ResponseWriter, r *http.Request) *fakeSandbox {
	sb := f.sandbox(r.PathValue("sandboxID"))
	if sb == nil {
		writeError(w, http.StatusNotFound, "sandbox \""+r.PathValue("sandboxID")+"\" not found")
	}
	return sb
}

// get answers SandboxDetail, without the envd token when f.noToken.
func (f *fakeE2B) get(w http.ResponseWriter, r *http.Request) {
	if sb := f.lookup(w, r); sb != nil {
		f.mu.Lock()
		defer f.mu.Unlock()
		d := e2bapi.SandboxDetail{ListedSandbox: f.listedJSON(sb), Domain: f.domainJSON()}
		if !f.noToken {
			d.EnvdAccessToken = sb.token
		}
		writeJSON(w, http.StatusOK, d)
	}
}

func (f *fakeE2B) kill(w http.ResponseWriter, r *http.Request) {
	if sb := f.lookup(w, r); sb != nil {
		f.end(f.eng.Lookup(sb.id), fakeengine.Deleted)
		w.WriteHeader(http.StatusNoContent)
	}
}

func (f *fakeE2B) timeout(w http.ResponseWriter, r *http.Request) {
	var req e2bapi.SandboxTimeout
	if !f.record(r, &req) || req.Timeout == nil || *req.Timeout <= 0 {
		writeError(w, http.StatusBadRequest, "timeout must be positive")
		return
	}
	if sb := f.lookup(w, r); sb != nil {
		f.eng.Lookup(sb.id).SetDeadline(time.Now().Add(time.Duration(*req.Timeout) * time.Second))
		w.WriteHeader(http.StatusNoContent)
	}
}

// connect extends a running sandbox's life, never shortens it.
func (f *fakeE2B) connect(w http.ResponseWriter, r *http.Request) {
	var req e2bapi.ConnectSandbox
	if !f.record(r, &req) || req.Timeout == nil {
		writeError(w, http.StatusBadRequest, "timeout is required")
		return
	}
	if sb := f.lookup(w, r); sb != nil {
		f.mu.Lock()
		defer f.mu.Unlock()
		eb := f.eng.Lookup(sb.id)
		if end := time.Now().Add(time.Duration(*req.Timeout) * time.Second); end.After(eb.Deadline()) {
			eb.SetDeadline(end)
		}
		writeJSON(w, http.StatusOK, f.sandboxJSON(sb))
	}
}

// list filters by ?metadata= and pages by ?limit= and X-Next-Token (v2).
func (f *fakeE2B) list(w http.ResponseWriter, r *http.Request) {
	want, err := url.ParseQuery(r.URL.Query().Get(e2bapi.QueryMetadata))
	if err != nil {
		writeError(w, http.StatusBadRequest, "metadata is not a query string")
		return
	}
	limit := 2 // small pages, so that paging is exercised
	labels := map[string]string{}
	for k := range want {
		labels[k] = want.Get(k)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for _, eb := range f.eng.List(labels) {
		ids = append(ids, eb.ID)
	}
	slices.Sort(ids)
	if strings.HasPrefix(r.URL.Path, "/v2/") {
		if next := r.URL.Query().Get(e2bapi.QueryNextToken); next != "" {
			i, _ := slices.BinarySearch(ids, next)
			ids = ids[i:]
		}
		if len(ids) > limit {
			w.Header().Set(e2bapi.NextTokenHeader, ids[limit])
			ids = ids[:limit]
		}
	}
	out := []e2bapi.ListedSandbox{}
	for _, id := range ids {
		out = append(out, f.listedJSON(f.eng.Lookup(id).Value.(*fakeSandbox)))
	}
	writeJSON(w, http.StatusOK, out)
}

// route is the data plane: the sandbox named by E2b-Sandbox-Id, else by a
// Host of 49983-<id>.<domain>.
func (f *fakeE2B) route(w http.ResponseWriter, r *http.Request) {
	id, port := r.Header.Get(e2bapi.SandboxIDHeader), r.Header.Get(e2bapi.SandboxPortHeader)
	if id == "" {
		f.mu.Lock()
		f.hosts = append(f.hosts, r.Host)
		f.mu.Unlock()
		host, _, _ := strings.Cut(r.Host, ".")
		port, id, _ = strings.Cut(host, "-")
	}
	sb := f.sandbox(id)
	if sb != nil && port != e2bapi.EnvdPort {
		f.port(w, r, sb, port)
		return
	}
	if sb == nil {
		msg := "sandbox not found"
		if f.echoKey {
			msg += " (token " + r.Header.Get("X-Access-Token") + ")"
		}
		writeError(w, http.StatusBadGateway, msg)
		return
	}
	if f.dropMode && r.URL.Path == "/files" {
		q := r.URL.Query()
		q.Del("mode")
		r.URL.RawQuery = q.Encode()
	}
	sb.srv.ServeHTTP(w, r)
}

// port proxies to a port of a sandbox, on the loopback address (the
// fake's commands are host processes), as E2B's edge does: the traffic
// token first where the sandbox has one, 502 when nothing listens.
func (f *fakeE2B) port(w http.ResponseWriter, r *http.Request, sb *fakeSandbox, port string) {
	if sb.traffic != "" && r.Header.Get(e2bapi.TrafficAccessTokenHeader) != sb.traffic {
		writeError(w, http.StatusForbidden, "Sandbox is secured with traffic access token. Token header 'e2b-traffic-access-token' is missing")
		return
	}
	closed := func(w http.ResponseWriter) {
		writeError(w, http.StatusBadGateway, "The sandbox is running but port is not open")
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		closed(w)
		return
	}
	fakeengine.Proxy(n, "", []string{e2bapi.TrafficAccessTokenHeader}, closed).ServeHTTP(w, r)
}

// callsOf counts the recorded calls "METHOD path".
func (f *fakeE2B) callsOf(what string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c.what == what {
			n++
		}
	}
	return n
}

// callTimes are the times of the recorded calls "METHOD path".
func (f *fakeE2B) callTimes(what string) []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ts []time.Time
	for _, c := range f.calls {
		if c.what == what {
			ts = append(ts, c.at)
		}
	}
	return ts
}

// body returns the JSON bodies of the recorded calls "METHOD path".
func (f *fakeE2B) body(what string) []json.RawMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.bodies[what])
}

// forget drops a sandbox behind the driver's back.
func (f *fakeE2B) forget(id string) {
	if sb := f.sandbox(id); sb != nil {
		f.end(f.eng.Lookup(sb.id), fakeengine.Deleted)
	}
}

func (f *fakeE2B) has(id string) bool { return f.sandbox(id) != nil }

func (f *fakeE2B) live() []string {
	var ids []string
	for _, eb := range f.eng.List(nil) {
		ids = append(ids, eb.ID)
	}
	return ids
}
