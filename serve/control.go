package serve

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/serve/dataplane"
)

// Labels the server puts on every sandbox it creates.
const (
	LauncherLabel = "berth.launcher"
	LauncherValue = "serve"
	IDLabel       = "berth.serve.id"
	// ServeLabelPrefix marks the labels clients may not set.
	ServeLabelPrefix = "berth.serve."
)

// Default timeouts of create when the body names none (as upstream).
const (
	defaultTimeoutV1 = 15 * time.Second
	defaultTimeoutV2 = 300 * time.Second
)

func (s *Server) routes(mux *http.ServeMux) {
	mux.HandleFunc(e2bapi.RouteHealth, s.method("GET", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}))
	mux.Handle("/metrics", s.method("GET", s.m.handler().ServeHTTP))
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
func (s *Server) keyed(byMethod map[string]keyedFunc) http.HandlerFunc {
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

func (s *Server) method(m string, f http.HandlerFunc) http.HandlerFunc {
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

func (s *Server) unsupported(what string) keyedFunc {
	return func(w http.ResponseWriter, r *http.Request, _ string) {
		writeError(w, http.StatusNotImplemented, "%s is not supported by berth serve (provider %s): NotSupported", what, s.p.Name())
	}
}

// timeoutOf validates a timeout in seconds from a request body.
func (s *Server) timeoutOf(sec *int64, def time.Duration) (time.Duration, error) {
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

func (s *Server) create(w http.ResponseWriter, r *http.Request, keyID string, defTimeout time.Duration) {
	var req e2bapi.NewSandbox
	if !s.readJSON(w, r, &req) {
		return
	}
	refuse := func(status int, format string, args ...any) {
		s.m.creates.WithLabelValues("refused").Inc()
		writeError(w, status, format, args...)
	}
	ttl, err := s.timeoutOf(req.Timeout, defTimeout)
	if err != nil {
		refuse(http.StatusBadRequest, "%v", err)
		return
	}
	if req.AutoPause != nil && *req.AutoPause {
		refuse(http.StatusBadRequest, "autoPause is not supported by berth serve: sandboxes cannot be paused (NotSupported)")
		return
	}
	if len(req.VolumeMounts) > 0 {
		refuse(http.StatusBadRequest, "volume mounts are not supported by berth serve (NotSupported)")
		return
	}
	tmpl := req.TemplateID
	if tmpl == "" {
		tmpl = e2bapi.DefaultTemplate
	}
	built, status, err := s.templateImage(keyID, tmpl)
	if err != nil {
		refuse(status, "%v", err)
		return
	}
	image := built.image
	id := newID()
	labels := map[string]string{}
	for k, v := range req.Metadata {
		// berth.serve.* are the server's own; other berth.* keys are
		// ownership labels a berth client (berth run through the e2b
		// provider) sets and reaps by, so they pass through.
		if strings.HasPrefix(k, ServeLabelPrefix) {
			refuse(http.StatusBadRequest, "metadata key %q is reserved (%s*)", k, ServeLabelPrefix)
			return
		}
		labels[k] = v
	}
	labels[IDLabel] = id
	_, launcherSet := labels[LauncherLabel]
	if !launcherSet {
		labels[LauncherLabel] = LauncherValue
	}
	internet := req.AllowInternetAccess == nil || *req.AllowInternetAccess
	spec := sandbox.Spec{Image: image, Env: req.EnvVars, Labels: labels, TTL: ttl, Network: sandbox.Network{Mode: sandbox.NetworkNone},
		Resources: s.opts.Resources}
	if internet && !s.opts.DenyInternet && s.caps.Supports(sandbox.NetworkPublic) {
		spec.Network.Mode = sandbox.NetworkPublic
	} else {
		internet = false
	}
	token := s.newToken(keyID, id)
	privateTraffic := req.Network != nil && req.Network.AllowPublicTraffic != nil && !*req.Network.AllowPublicTraffic
	if s.opts.Stateless {
		stateLabels(labels, keyID, token, tmpl, internet, spec.Resources, !launcherSet)
		if privateTraffic {
			labels[privateTrafficLabel] = "true"
		}
	}
	if err := spec.Validate(); err != nil {
		refuse(http.StatusBadRequest, "%v", err)
		return
	}
	if over := s.st.reserve(keyID, spec.Resources, s.opts.MaxSandboxesPerKey, s.opts.KeyCeiling); over != "" {
		s.m.rateLimited.Inc()
		s.m.creates.WithLabelValues("refused").Inc()
		after := time.Second
		if end := s.st.soonestEnd(keyID); !end.IsZero() {
			after = min(max(time.Until(end), time.Second), time.Minute)
		}
		writeRetry(w, after, "a sandbox more would give this API key %s; kill one or wait", over)
		return
	}
	start := time.Now()
	sb, err := s.p.Create(r.Context(), spec)
	if err != nil {
		s.st.release(keyID, spec.Resources)
		s.m.creates.WithLabelValues("failed").Inc()
		s.log.Warn("create failed", "key", keyID, "template", tmpl, "error", err)
		if sandbox.ClassOf(err) == sandbox.ResourceExhausted && sandbox.RetryAfterOf(err) == 0 && !sandbox.IsPermanent(err) {
			writeRetry(w, time.Second, "creating the sandbox: %v", err)
			return
		}
		writeClassed(w, err, "creating the sandbox: %v", err)
		return
	}
	rec := &record{
		id: id, keyID: keyID, token: token, templateID: tmpl, image: image,
		metadata: maps.Clone(req.Metadata), internet: internet, startedAt: start, sb: sb,
		resources: spec.Resources, shared: s.opts.Stateless,
	}
	if rec.metadata == nil {
		rec.metadata = map[string]string{}
	}
	if privateTraffic {
		rec.trafficToken = s.newTrafficToken(keyID, id)
	}
	if err := s.attachPlane(r.Context(), rec); err != nil {
		s.abandon(rec)
		writeClassed(w, err, "setting up the sandbox's data plane: %v", err)
		return
	}
	if err := s.startTemplateIn(r, rec, built); err != nil {
		s.abandon(rec)
		writeClassed(w, err, "starting the sandbox: %v", err)
		return
	}
	s.arm(rec, ttl)
	if !s.st.add(rec) {
		s.abandon(rec)
		writeError(w, http.StatusServiceUnavailable, "the server is shutting down")
		return
	}
	s.m.creates.WithLabelValues("ok").Inc()
	s.log.Info("created sandbox", "sandbox", id, "backend_id", sb.ID(), "key", keyID, "template", tmpl,
		"image", image, "ttl", ttl, "network", spec.Network.Mode, "duration", time.Since(start))
	writeJSON(w, http.StatusCreated, s.sandboxJSON(rec))
}

// abandon deletes a sandbox whose record never became visible.
func (s *Server) abandon(rec *record) {
	s.m.creates.WithLabelValues("failed").Inc()
	rec.mu.Lock()
	rec.gen++
	if rec.timer != nil {
		rec.timer.Stop()
	}
	rec.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), teardownTimeout)
	defer cancel()
	_ = rec.sb.Delete(ctx)
	s.release(rec)
}

// attachPlane picks the data plane: straight to the sandbox's own envd
// when the driver has one, else through the sandbox API.
func (s *Server) attachPlane(ctx context.Context, rec *record) error {
	onExec := func() { s.m.execs.Inc() }
	rec.ports = dataplane.NewPorts(rec.sb, s.caps, dataplane.PortOptions{SandboxID: rec.id, Logger: s.log.With("sandbox", rec.id)})
	ep, err := rec.sb.EnvdEndpoint(ctx)
	switch {
	case err == nil:
		px, err := dataplane.NewProxy(ep, dataplane.ProxyOptions{
			MaxUploadBytes: s.opts.MaxUploadBytes, OnExec: onExec,
			Logger: s.log.With("sandbox", rec.id),
		})
		if err != nil {
			return err
		}
		rec.plane = px
		return nil
	case sandbox.ClassOf(err) != sandbox.NotSupported:
		return err
	}
	h, err := dataplane.New(rec.sb, dataplane.Options{HomeDir: s.opts.HomeDir, MaxUploadBytes: s.opts.MaxUploadBytes, OnExec: onExec})
	if err != nil {
		return err
	}
	rec.plane, rec.close = h, h
	return nil
}

func (s *Server) sandboxJSON(rec *record) e2bapi.Sandbox {
	j := e2bapi.Sandbox{
		SandboxID: rec.id, TemplateID: rec.templateID, Alias: rec.templateID, ClientID: "",
		EnvdVersion: EnvdVersion, EnvdAccessToken: rec.token, Domain: e2bapi.String(s.opts.Domain),
	}
	if rec.trafficToken != "" {
		j.TrafficAccessToken = e2bapi.String(rec.trafficToken)
	}
	return j
}

func (s *Server) listedJSON(rec *record) e2bapi.ListedSandbox {
	return e2bapi.ListedSandbox{
		SandboxID: rec.id, TemplateID: rec.templateID, Alias: rec.templateID, ClientID: "",
		CPUCount: max(int(math.Ceil(rec.resources.CPUs)), 1), MemoryMB: rec.resources.MemoryMB, DiskSizeMB: rec.resources.StorageMB,
		StartedAt: rec.startedAt.UTC(), EndAt: rec.deadline().UTC(),
		EnvdVersion: EnvdVersion, State: e2bapi.StateRunning, Metadata: rec.metadata,
	}
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, keyID string) {
	rec := s.owned(w, r, keyID)
	if rec == nil {
		return
	}
	writeJSON(w, http.StatusOK, e2bapi.SandboxDetail{ListedSandbox: s.listedJSON(rec), EnvdAccessToken: rec.token,
		Domain: e2bapi.String(s.opts.Domain), AllowInternetAccess: e2bapi.Bool(rec.internet)})
}

func (s *Server) kill(w http.ResponseWriter, r *http.Request, keyID string) {
	if rec := s.owned(w, r, keyID); rec == nil {
		return
	}
	if err := s.deleteSandbox(r.Context(), r.PathValue("sandboxID"), "api"); err != nil {
		writeClassed(w, err, "%v", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// setTimeout moves the end to now + timeout, shorter or longer.
func (s *Server) setTimeout(w http.ResponseWriter, r *http.Request, keyID string) {
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
	if err := s.retime(r.Context(), rec, d, true); err != nil {
		writeClassed(w, err, "%v", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// retime sets the end to now + d on the server and the provider; unless
// shorten, an end already later is kept.
func (s *Server) retime(ctx context.Context, rec *record, d time.Duration, shorten bool) error {
	if !shorten && time.Until(rec.deadline()) >= d {
		return nil
	}
	if err := rec.sb.SetTimeout(ctx, d); err != nil && sandbox.ClassOf(err) != sandbox.NotSupported {
		return err
	}
	s.arm(rec, d)
	return nil
}

// refresh is the keep-alive of older SDKs: {"duration": s} extends.
func (s *Server) refresh(w http.ResponseWriter, r *http.Request, keyID string) {
	rec := s.owned(w, r, keyID)
	if rec == nil {
		return
	}
	var req e2bapi.SandboxRefresh
	if !s.readJSON(w, r, &req) {
		return
	}
	d, err := s.timeoutOf(req.Duration, 0)
	if err == nil && d > 0 {
		err = s.retime(r.Context(), rec, d, false)
	}
	if err != nil {
		writeClassed(w, err, "%v", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// connect answers a running sandbox with 200; a timeout in the body only
// ever extends its life, as upstream does for running sandboxes.
func (s *Server) connect(w http.ResponseWriter, r *http.Request, keyID string) {
	rec := s.owned(w, r, keyID)
	if rec == nil {
		return
	}
	var req e2bapi.ConnectSandbox
	if !s.readJSON(w, r, &req) {
		return
	}
	d, err := s.timeoutOf(req.Timeout, 0)
	if err == nil && d > 0 {
		err = s.retime(r.Context(), rec, d, false)
	}
	if err != nil {
		writeClassed(w, err, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, s.sandboxJSON(rec))
}

// resume is how SDKs before 2.6 connect to a paused sandbox (they try
// POST /timeout first). Sandboxes here are never paused, so a live one is
// 409 "already running", which those SDKs read as success; unknown is 404.
func (s *Server) resume(w http.ResponseWriter, r *http.Request, keyID string) {
	rec := s.owned(w, r, keyID)
	if rec == nil {
		return
	}
	writeError(w, http.StatusConflict, "sandbox %q is already running", rec.id)
}

func (s *Server) sandboxMetrics(w http.ResponseWriter, r *http.Request, keyID string) {
	if s.owned(w, r, keyID) == nil {
		return
	}
	writeJSON(w, http.StatusOK, []any{})
}

func (s *Server) sandboxLogs(w http.ResponseWriter, r *http.Request, keyID string) {
	if s.owned(w, r, keyID) == nil {
		return
	}
	writeJSON(w, http.StatusOK, e2bapi.SandboxLogs{Logs: []e2bapi.SandboxLog{}, LogEntries: []e2bapi.SandboxLogEntry{}})
}

var errBadQuery = errors.New("bad query")

func badQuery(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errBadQuery}, args...)...)
}
