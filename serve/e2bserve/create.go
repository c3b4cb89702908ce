package e2bserve

import (
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/serve/internal/core"
)

// Default timeouts of create when the body names none (as upstream).
const (
	defaultTimeoutV1 = 15 * time.Second
	defaultTimeoutV2 = 300 * time.Second
)

// pendingCreate is a create the server accepted: the spec the provider
// gets, and the record the sandbox becomes.
type pendingCreate struct {
	spec  sandbox.Spec
	rec   *core.Record // without its sandbox
	built builtImage
	ttl   time.Duration
}

// create answers POST /sandboxes and /v2/sandboxes (NewSandbox ->
// Sandbox): the body is checked, a slot of the key reserved, the sandbox
// made, its template started, and its record goes live.
func (s *API) create(w http.ResponseWriter, r *http.Request, keyID string, defTimeout time.Duration) {
	var req e2bapi.NewSandbox
	if !s.readJSON(w, r, &req) {
		return
	}
	pc, status, err := s.prepare(keyID, &req, defTimeout)
	if err != nil {
		s.m.Creates.WithLabelValues("refused").Inc()
		writeError(w, status, "%v", err)
		return
	}
	if over := s.c.Reserve(keyID, pc.spec.Resources); over != "" {
		s.m.RateLimited.Inc()
		s.m.Creates.WithLabelValues("refused").Inc()
		writeRetry(w, s.c.RetryAfter(keyID), "a sandbox more would give this API key %s; kill one or wait", over)
		return
	}
	if rec := s.launch(w, r, pc); rec != nil {
		writeJSON(w, http.StatusCreated, s.sandboxJSON(rec))
	}
}

// prepare checks a create and makes its spec and record; a refusal comes
// with its status.
func (s *API) prepare(keyID string, req *e2bapi.NewSandbox, defTimeout time.Duration) (*pendingCreate, int, error) {
	ttl, err := s.timeoutOf(req.Timeout, defTimeout)
	switch {
	case err != nil:
		return nil, http.StatusBadRequest, err
	case req.AutoPause != nil && *req.AutoPause:
		return nil, http.StatusBadRequest, sandbox.Errorf(sandbox.NotSupported, "autoPause is not supported by berth serve: sandboxes cannot be paused (NotSupported)")
	case len(req.VolumeMounts) > 0:
		return nil, http.StatusBadRequest, sandbox.Errorf(sandbox.NotSupported, "volume mounts are not supported by berth serve (NotSupported)")
	}
	tmpl := req.TemplateID
	if tmpl == "" {
		tmpl = e2bapi.DefaultTemplate
	}
	built, status, err := s.templateImage(keyID, tmpl)
	if err != nil {
		return nil, status, err
	}
	id := core.NewID()
	labels, launcherSet, err := createLabels(req.Metadata, id)
	if err != nil {
		return nil, http.StatusBadRequest, err
	}
	spec := sandbox.Spec{Image: built.image, Env: req.EnvVars, Labels: labels, TTL: ttl, Network: sandbox.Network{Mode: sandbox.NetworkNone},
		Resources: s.opts.Resources}
	internet := (req.AllowInternetAccess == nil || *req.AllowInternetAccess) && !s.opts.DenyInternet && s.caps.Supports(sandbox.NetworkPublic)
	if internet {
		spec.Network.Mode = sandbox.NetworkPublic
	}
	rec := &core.Record{ID: id, KeyID: keyID, Token: s.c.NewToken(keyID, id), TemplateID: tmpl, Image: built.image,
		Metadata: maps.Clone(req.Metadata), Internet: internet, Resources: spec.Resources, Shared: s.opts.Stateless}
	if rec.Metadata == nil {
		rec.Metadata = map[string]string{}
	}
	if req.Network != nil && req.Network.AllowPublicTraffic != nil && !*req.Network.AllowPublicTraffic {
		rec.TrafficToken = s.c.NewTrafficToken(keyID, id)
	}
	if s.opts.Stateless {
		core.StateLabels(labels, rec, !launcherSet)
	}
	if err := spec.Validate(); err != nil {
		return nil, http.StatusBadRequest, err
	}
	return &pendingCreate{spec: spec, rec: rec, built: built, ttl: ttl}, http.StatusOK, nil
}

// createLabels are a create's metadata as the sandbox's labels, with the
// server's own. berth.serve.* keys are the server's; other berth.* keys
// are ownership labels a berth client (berth run through the e2b
// provider) sets and reaps by, so they pass through, LauncherLabel too
// (launcherSet).
func createLabels(metadata map[string]string, id string) (labels map[string]string, launcherSet bool, err error) {
	labels = map[string]string{}
	for k, v := range metadata {
		if strings.HasPrefix(k, core.ServeLabelPrefix) {
			return nil, false, sandbox.Errorf(sandbox.InvalidArgument, "metadata key %q is reserved (%s*)", k, core.ServeLabelPrefix)
		}
		labels[k] = v
	}
	labels[core.IDLabel] = id
	if _, launcherSet = labels[core.LauncherLabel]; !launcherSet {
		labels[core.LauncherLabel] = core.LauncherValue
	}
	return labels, launcherSet, nil
}

// launch has the provider make the reserved sandbox, then brings its
// record live: the data plane, the template's start and ready commands,
// the timer. It returns nil when it has answered a failure; whatever
// failed after the provider's create deletes the sandbox.
func (s *API) launch(w http.ResponseWriter, r *http.Request, pc *pendingCreate) *core.Record {
	rec := pc.rec
	start := time.Now()
	sb, err := s.p.Create(r.Context(), pc.spec)
	if err != nil {
		s.c.Release(rec.KeyID, pc.spec.Resources)
		s.m.Creates.WithLabelValues("failed").Inc()
		s.log.Warn("create failed", "key", rec.KeyID, "template", rec.TemplateID, "error", err)
		if sandbox.ClassOf(err) == sandbox.ResourceExhausted && sandbox.RetryAfterOf(err) == 0 && !sandbox.IsPermanent(err) {
			writeRetry(w, time.Second, "creating the sandbox: %v", err)
			return nil
		}
		writeClassed(w, err, "creating the sandbox: %v", err)
		return nil
	}
	rec.Sandbox, rec.StartedAt = sb, start
	if err := s.c.AttachPlane(r.Context(), rec); err != nil {
		s.c.Abandon(rec)
		writeClassed(w, err, "setting up the sandbox's data plane: %v", err)
		return nil
	}
	if err := s.startTemplateIn(r, rec, pc.built); err != nil {
		s.c.Abandon(rec)
		writeClassed(w, err, "starting the sandbox: %v", err)
		return nil
	}
	s.c.Arm(rec, pc.ttl)
	if !s.c.Add(rec) {
		s.c.Abandon(rec)
		writeError(w, http.StatusServiceUnavailable, "the server is shutting down")
		return nil
	}
	s.m.Creates.WithLabelValues("ok").Inc()
	s.log.Info("created sandbox", "sandbox", rec.ID, "backend_id", sb.ID(), "key", rec.KeyID, "template", rec.TemplateID,
		"image", rec.Image, "ttl", pc.ttl, "network", pc.spec.Network.Mode, "duration", time.Since(start))
	return rec
}
