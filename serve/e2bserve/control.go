package e2bserve

import (
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/serve/internal/core"
)

func (s *API) routes(mux *http.ServeMux) {
	mux.HandleFunc(e2bapi.RouteHealth, s.method("GET", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}))
	mux.Handle("/metrics", s.method("GET", s.m.Handler().ServeHTTP))
	mux.HandleFunc(e2bapi.RouteSandboxes, s.keyed(map[string]keyedFunc{
		"POST": func(w http.ResponseWriter, r *http.Request, key string) { s.create(w, r, key, defaultTimeoutV1) },
		"GET":  s.list,
	}))
	mux.HandleFunc(e2bapi.RouteSandboxesV2, s.keyed(map[string]keyedFunc{
		"POST": func(w http.ResponseWriter, r *http.Request, key string) { s.create(w, r, key, defaultTimeoutV2) },
		"GET":  s.list,
	}))
	mux.HandleFunc(e2bapi.RouteSandbox, s.keyed(map[string]keyedFunc{"GET": s.get, "DELETE": s.kill}))
	mux.HandleFunc(e2bapi.RouteTimeout, s.keyed(map[string]keyedFunc{"POST": s.setTimeout}))
	mux.HandleFunc(e2bapi.RouteRefreshes, s.keyed(map[string]keyedFunc{"POST": s.refresh}))
	mux.HandleFunc(e2bapi.RouteConnect, s.keyed(map[string]keyedFunc{"POST": s.connect}))
	mux.HandleFunc(e2bapi.RouteConnectV2, s.keyed(map[string]keyedFunc{"POST": s.connect}))
	mux.HandleFunc(e2bapi.RouteResume, s.keyed(map[string]keyedFunc{"POST": s.resume}))
	mux.HandleFunc(e2bapi.RouteMetrics, s.keyed(map[string]keyedFunc{"GET": s.sandboxMetrics}))
	mux.HandleFunc(e2bapi.RouteLogs, s.keyed(map[string]keyedFunc{"GET": s.sandboxLogs}))
	mux.HandleFunc(e2bapi.RouteLogsV2, s.keyed(map[string]keyedFunc{"GET": s.sandboxLogs}))
	// What a backend behind this server cannot do is refused at once, in
	// the E2B error shape, never left hanging.
	for path, what := range map[string]string{
		e2bapi.RoutePause:             "pausing a sandbox",
		e2bapi.RouteSnapshots:         "snapshots",
		"/sandboxes/{sandboxID}/fork": "forking a sandbox",
		e2bapi.RouteNetwork:           "changing a running sandbox's network",
	} {
		mux.HandleFunc(path, s.keyed(map[string]keyedFunc{"*": s.unsupported(what)}))
	}
	s.templateRoutes(mux)
	// Template routes beyond the builds' (listing, tags, v1 builds).
	for _, path := range []string{"/templates", "/templates/", "/v2/templates", "/v2/templates/", "/v3/templates/", "/snapshots", "/snapshots/", "/volumes", "/volumes/"} {
		mux.HandleFunc(path, s.keyed(map[string]keyedFunc{"*": s.unsupported("this template route, snapshots and volumes")}))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no route %s %s", r.Method, r.URL.Path)
	})
}

type keyedFunc func(w http.ResponseWriter, r *http.Request, keyID string)

// keyed dispatches on the method ("*" takes any) after checking the API
// key; an unknown method is a JSON 405.
func (s *API) keyed(byMethod map[string]keyedFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f, ok := byMethod[r.Method]
		if !ok {
			f, ok = byMethod["*"]
		}
		if !ok {
			w.Header().Set("Allow", strings.Join(sortedKeys(byMethod), ", "))
			writeError(w, http.StatusMethodNotAllowed, "method %s is not allowed on %s", r.Method, r.URL.Path)
			return
		}
		key, ok := s.authKey(w, r)
		if !ok {
			return
		}
		f(w, r, key)
	}
}

func (s *API) method(m string, f http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != m && !(m == "GET" && r.Method == "HEAD") {
			w.Header().Set("Allow", m)
			writeError(w, http.StatusMethodNotAllowed, "method %s is not allowed on %s", r.Method, r.URL.Path)
			return
		}
		f(w, r)
	}
}

func sortedKeys(m map[string]keyedFunc) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		if k != "*" {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func (s *API) unsupported(what string) keyedFunc {
	return func(w http.ResponseWriter, r *http.Request, _ string) {
		writeError(w, http.StatusNotImplemented, "%s is not supported by berth serve (provider %s): NotSupported", what, s.p.Name())
	}
}

// timeoutOf validates a timeout in seconds from a request body.
func (s *API) timeoutOf(sec *int64, def time.Duration) (time.Duration, error) {
	if sec == nil {
		return def, nil
	}
	if *sec <= 0 {
		return 0, sandbox.Errorf(sandbox.InvalidArgument, "timeout must be positive, got %d", *sec)
	}
	if *sec > int64(s.opts.MaxTimeout/time.Second) {
		return 0, sandbox.Errorf(sandbox.InvalidArgument, "timeout %d s is over this server's maximum of %d s", *sec, int64(s.opts.MaxTimeout/time.Second))
	}
	return time.Duration(*sec) * time.Second, nil
}

func (s *API) sandboxJSON(rec *core.Record) e2bapi.Sandbox {
	j := e2bapi.Sandbox{
		SandboxID: rec.ID, TemplateID: rec.TemplateID, Alias: rec.TemplateID, ClientID: "",
		EnvdVersion: EnvdVersion, EnvdAccessToken: rec.Token, Domain: e2bapi.String(s.opts.Domain),
	}
	if rec.TrafficToken != "" {
		j.TrafficAccessToken = e2bapi.String(rec.TrafficToken)
	}
	return j
}

func (s *API) listedJSON(rec *core.Record) e2bapi.ListedSandbox {
	return e2bapi.ListedSandbox{
		SandboxID: rec.ID, TemplateID: rec.TemplateID, Alias: rec.TemplateID, ClientID: "",
		CPUCount: max(int(math.Ceil(rec.Resources.CPUs)), 1), MemoryMB: rec.Resources.MemoryMB, DiskSizeMB: rec.Resources.StorageMB,
		StartedAt: rec.StartedAt.UTC(), EndAt: rec.Deadline().UTC(),
		EnvdVersion: EnvdVersion, State: e2bapi.StateRunning, Metadata: rec.Metadata,
	}
}

func (s *API) get(w http.ResponseWriter, r *http.Request, keyID string) {
	rec := s.owned(w, r, keyID)
	if rec == nil {
		return
	}
	writeJSON(w, http.StatusOK, e2bapi.SandboxDetail{ListedSandbox: s.listedJSON(rec), EnvdAccessToken: rec.Token,
		Domain: e2bapi.String(s.opts.Domain), AllowInternetAccess: e2bapi.Bool(rec.Internet)})
}

func (s *API) kill(w http.ResponseWriter, r *http.Request, keyID string) {
	if rec := s.owned(w, r, keyID); rec == nil {
		return
	}
	if err := s.c.Delete(r.Context(), r.PathValue("sandboxID"), "api"); err != nil {
		writeClassed(w, err, "%v", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// setTimeout moves the end to now + timeout, shorter or longer.
func (s *API) setTimeout(w http.ResponseWriter, r *http.Request, keyID string) {
	rec := s.owned(w, r, keyID)
	if rec == nil {
		return
	}
	var req e2bapi.SandboxTimeout
	if !s.readJSON(w, r, &req) {
		return
	}
	if req.Timeout == nil {
		writeError(w, http.StatusBadRequest, "timeout is required")
		return
	}
	d, err := s.timeoutOf(req.Timeout, 0)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if err := s.c.Retime(r.Context(), rec, d, true); err != nil {
		writeClassed(w, err, "%v", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// refresh is the keep-alive of older SDKs: {"duration": s} extends.
func (s *API) refresh(w http.ResponseWriter, r *http.Request, keyID string) {
	var req e2bapi.SandboxRefresh
	if s.extend(w, r, keyID, &req, func() *int64 { return req.Duration }) != nil {
		w.WriteHeader(http.StatusNoContent)
	}
}

// connect answers a running sandbox with 200; a timeout in the body only
// ever extends its life, as upstream does for running sandboxes.
func (s *API) connect(w http.ResponseWriter, r *http.Request, keyID string) {
	var req e2bapi.ConnectSandbox
	if rec := s.extend(w, r, keyID, &req, func() *int64 { return req.Timeout }); rec != nil {
		writeJSON(w, http.StatusOK, s.sandboxJSON(rec))
	}
}

// extend reads body, then extends the key's sandbox to live at least the
// seconds secs reads from it (none: as it is). It returns nil when it has
// answered.
func (s *API) extend(w http.ResponseWriter, r *http.Request, keyID string, body any, secs func() *int64) *core.Record {
	rec := s.owned(w, r, keyID)
	if rec == nil || !s.readJSON(w, r, body) {
		return nil
	}
	d, err := s.timeoutOf(secs(), 0)
	if err == nil && d > 0 {
		err = s.c.Retime(r.Context(), rec, d, false)
	}
	if err != nil {
		writeClassed(w, err, "%v", err)
		return nil
	}
	return rec
}

// resume is how SDKs before 2.6 connect to a paused sandbox (they try
// POST /timeout first). Sandboxes here are never paused, so a live one is
// 409 "already running", which those SDKs read as success; unknown is 404.
func (s *API) resume(w http.ResponseWriter, r *http.Request, keyID string) {
	rec := s.owned(w, r, keyID)
	if rec == nil {
		return
	}
	writeError(w, http.StatusConflict, "sandbox %q is already running", rec.ID)
}

func (s *API) sandboxMetrics(w http.ResponseWriter, r *http.Request, keyID string) {
	if s.owned(w, r, keyID) == nil {
		return
	}
	writeJSON(w, http.StatusOK, []any{})
}

func (s *API) sandboxLogs(w http.ResponseWriter, r *http.Request, keyID string) {
	if s.owned(w, r, keyID) == nil {
		return
	}
	writeJSON(w, http.StatusOK, e2bapi.SandboxLogs{Logs: []e2bapi.SandboxLog{}, LogEntries: []e2bapi.SandboxLogEntry{}})
}
