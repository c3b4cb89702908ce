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
		mux.HandleFunc("POST /v2/sandboxes", f.create)
		mux.HandleFunc("POST /v2/sandboxes/{id}/connect", f.connect)
	}
	if f.v2 == "all" || f.v2 == "list" {
		mux.HandleFunc("GET /v2/sandboxes", f.list)
	}
	mux.HandleFunc("POST /sandboxes", f.create)
	mux.HandleFunc("GET /sandboxes", f.list)
	mux.HandleFunc("GET /sandboxes/{id}", f.get)
	mux.HandleFunc("DELETE /sandboxes/{id}", f.kill)
	mux.HandleFunc("POST /sandboxes/{id}/timeout", f.timeout)
	mux.HandleFunc("POST /sandboxes/{id}/connect", f.connect)
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
		if got := r.Header.Get("X-API-KEY"); got != f.key {
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
	writeJSON(w, status, map[string]any{"code": status, "message": msg})
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
	var req struct {
		TemplateID string            `json:"templateID"`
		Timeout    *int              `json:"timeout"`
		Metadata   map[string]string `json:"metadata"`
		EnvVars    map[string]string `json:"envVars"`
		Network    *struct {
			AllowPublicTraffic *bool `json:"allowPublicTraffic"`
		} `json:"network"`
	}
	if !f.record(r, &req) || req.TemplateID == "" {
		writeError(w, http.StatusBadRequest, "templateID is required")
		return
	}
	if req.TemplateID != "base" {
		writeError(w, http.StatusNotFound, "template '"+req.TemplateID+"' not found")
		return
	}
	timeout := 300
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
	writeJSON(w, http.StatusCreated, f.sandboxJSON(sb, true))
}

// sandboxJSON is the Sandbox / SandboxDetail answer.
func (f *fakeE2B) sandboxJSON(sb *fakeSandbox, token bool) map[string]any {
	eb := f.eng.Lookup(sb.id)
	m := map[string]any{
		"sandboxID": sb.id, "templateID": sb.template, "clientID": "", "envdVersion": "0.6.0",
		"startedAt": eb.Created, "endAt": eb.Deadline(), "state": "running", "metadata": eb.Labels(),
		"domain": nil,
	}
	if f.domain != "" {
		m["domain"] = f.domain
	}
	if token {
		m["envdAccessToken"] = sb.token
		if sb.traffic != "" {
			m["trafficAccessToken"] = sb.traffic
		}
	}
	return m
}

func (f *fakeE2B) lookup(w http.ResponseWriter, r *http.Request) *fakeSandbox {
	sb := f.sandbox(r.PathValue("id"))
	if sb == nil {
		writeError(w, http.StatusNotFound, "sandbox \""+r.PathValue("id")+"\" not found")
	}
	return sb
}

func (f *fakeE2B) get(w http.ResponseWriter, r *http.Request) {
	if sb := f.lookup(w, r); sb != nil {
		f.mu.Lock()
		defer f.mu.Unlock()
		writeJSON(w, http.StatusOK, f.sandboxJSON(sb, !f.noToken))
	}
}

func (f *fakeE2B) kill(w http.ResponseWriter, r *http.Request) {
	if sb := f.lookup(w, r); sb != nil {
		f.end(f.eng.Lookup(sb.id), fakeengine.Deleted)
		w.WriteHeader(http.StatusNoContent)
	}
}

func (f *fakeE2B) timeout(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Timeout int `json:"timeout"`
	}
	if !f.record(r, &req) || req.Timeout <= 0 {
		writeError(w, http.StatusBadRequest, "timeout must be positive")
		return
	}
	if sb := f.lookup(w, r); sb != nil {
		f.eng.Lookup(sb.id).SetDeadline(time.Now().Add(time.Duration(req.Timeout) * time.Second))
		w.WriteHeader(http.StatusNoContent)
	}
}

// connect extends a running sandbox's life, never shortens it.
func (f *fakeE2B) connect(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Timeout *int `json:"timeout"`
	}
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
		writeJSON(w, http.StatusOK, f.sandboxJSON(sb, true))
	}
}

// list filters by ?metadata= and pages by ?limit= and X-Next-Token (v2).
func (f *fakeE2B) list(w http.ResponseWriter, r *http.Request) {
	want, err := url.ParseQuery(r.URL.Query().Get("metadata"))
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
		if next := r.URL.Query().Get("nextToken"); next != "" {
			i, _ := slices.BinarySearch(ids, next)
			ids = ids[i:]
		}
		if len(ids) > limit {
			w.Header().Set("X-Next-Token", ids[limit])
			ids = ids[:limit]
		}
	}
	out := []map[string]any{}
	for _, id := range ids {
		m := f.sandboxJSON(f.eng.Lookup(id).Value.(*fakeSandbox), false)
		m["cpuCount"], m["memoryMB"], m["diskSizeMB"] = 2, 512, 1024
		out = append(out, m)
	}
	writeJSON(w, http.StatusOK, out)
}

// route is the data plane: the sandbox named by E2b-Sandbox-Id, else by a
// Host of 49983-<id>.<domain>.
func (f *fakeE2B) route(w http.ResponseWriter, r *http.Request) {
	id, port := r.Header.Get("E2b-Sandbox-Id"), r.Header.Get("E2b-Sandbox-Port")
	if id == "" {
		f.mu.Lock()
		f.hosts = append(f.hosts, r.Host)
		f.mu.Unlock()
		host, _, _ := strings.Cut(r.Host, ".")
		port, id, _ = strings.Cut(host, "-")
	}
	sb := f.sandbox(id)
	if sb != nil && port != "49983" {
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
	if sb.traffic != "" && r.Header.Get("E2b-Traffic-Access-Token") != sb.traffic {
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
	fakeengine.Proxy(n, "", []string{"E2b-Traffic-Access-Token"}, closed).ServeHTTP(w, r)
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
