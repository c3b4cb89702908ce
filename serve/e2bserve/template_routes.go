package e2bserve

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/serve/internal/core"
)

// The routes of E2B template builds, as the JS SDK 2.51's Template.build
// calls them: POST /v3/templates (name -> template and build IDs), GET and
// PUT /templates/{templateID}/files/{hash} (template_files.go), POST
// /v2/templates/{templateID}/builds/{buildID} (the steps; the build
// starts), GET /templates/{templateID}/builds/{buildID}/status (polled,
// with logsOffset), GET /templates/aliases/{alias} (Template.exists), and
// DELETE /templates/{templateID}. Builds run where the provider builds
// (sandbox.Provider.BuildImage: on local, the Dockerfile builder); a
// provider that cannot build answers 501.
func (s *API) templateRoutes(mux *http.ServeMux) {
	mux.HandleFunc(e2bapi.RouteTemplatesV3, s.keyed(map[string]keyedFunc{"POST": s.requestBuild}))
	mux.HandleFunc(e2bapi.RouteBuildV2, s.keyed(map[string]keyedFunc{"POST": s.startBuild}))
	mux.HandleFunc(e2bapi.RouteBuildStatus, s.keyed(map[string]keyedFunc{"GET": s.buildStatus}))
	mux.HandleFunc(e2bapi.RouteTemplateFile, s.filesRoute)
	mux.HandleFunc(e2bapi.RouteAlias, s.keyed(map[string]keyedFunc{"GET": s.aliasLookup}))
	mux.HandleFunc(e2bapi.RouteTemplate, s.keyed(map[string]keyedFunc{"DELETE": s.deleteTemplate}))
}

// buildsServed answers 501 unless this server builds templates.
func (s *API) buildsServed(w http.ResponseWriter) bool {
	switch {
	case s.opts.TemplateBuilds.Disabled:
		writeError(w, http.StatusNotImplemented, "template builds are turned off on this server (NotSupported)")
		return false
	case !s.caps.BuildImage:
		writeError(w, http.StatusNotImplemented, "template builds are not supported by berth serve over provider %s: it does not build images (NotSupported); use --template NAME=IMAGE", s.p.Name())
		return false
	}
	return true
}

// requestBuild is POST /v3/templates (TemplateBuildRequestV3 ->
// TemplateRequestResponseV3). cpuCount, memoryMB and minFreeDiskMb are
// read and not used: every sandbox gets this server's limits.
func (s *API) requestBuild(w http.ResponseWriter, r *http.Request, keyID string) {
	if !s.buildsServed(w) {
		return
	}
	var req e2bapi.TemplateBuildRequestV3
	if !s.readJSON(w, r, &req) {
		return
	}
	name := req.Name
	if name == "" {
		name = req.Alias
	}
	if name == "" {
		writeError(w, http.StatusBadRequest, "a template name is required")
		return
	}
	tm, b, status, err := s.tpl.request(keyID, name, req.Tags)
	if err != nil {
		writeError(w, status, "%v", err)
		return
	}
	writeJSON(w, http.StatusAccepted, e2bapi.TemplateRequestResponseV3{
		TemplateID: tm.id, BuildID: b.id, Names: []string{tm.alias}, Aliases: []string{tm.alias}, Tags: b.tags,
	})
}

// startBuild is POST /v2/templates/{templateID}/builds/{buildID}
// (TemplateBuildStartV2): the steps are checked, then built in the
// background; 202 at once.
func (s *API) startBuild(w http.ResponseWriter, r *http.Request, keyID string) {
	if !s.buildsServed(w) {
		return
	}
	tm, b := s.ownedBuild(w, r, keyID)
	if b == nil {
		return
	}
	var req e2bapi.TemplateBuildStartV2
	if !s.readJSON(w, r, &req) {
		return
	}
	var base string
	switch {
	case (req.FromImage == "") == (req.FromTemplate == ""):
		writeError(w, http.StatusBadRequest, "exactly one of fromImage and fromTemplate is required")
		return
	case req.FromImage != "":
		base = req.FromImage
	default:
		img, status, err := s.templateImage(keyID, req.FromTemplate)
		if err != nil {
			writeError(w, status, "fromTemplate: %v", err)
			return
		}
		base = img.image
	}
	rc, err := newRecipe(req, base, s.tpl.opts.MaxSteps, func(hash string) bool { return s.tpl.present(keyID, hash) })
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if req.FromImage != "" {
		rc.pull = s.opts.ClientPull() // the client named the base; a template's is the operator's
	}
	status, err := s.tpl.start(keyID, b, rc)
	switch {
	case status == http.StatusTooManyRequests:
		writeRetry(w, 5*time.Second, "%v", err)
		return
	case err != nil:
		writeError(w, status, "%v", err)
		return
	}
	s.log.Info("template build started", "template", tm.alias, "build", b.id, "key", keyID, "steps", rc.steps)
	w.WriteHeader(http.StatusAccepted)
}

// ownedBuild finds the key's template and build named by the path; on
// failure it has answered 404.
func (s *API) ownedBuild(w http.ResponseWriter, r *http.Request, keyID string) (*template, *build) {
	tm := s.tpl.owned(keyID, r.PathValue("templateID"))
	if tm == nil {
		writeError(w, http.StatusNotFound, "template %q not found", r.PathValue("templateID"))
		return nil, nil
	}
	b := s.tpl.buildOf(tm, r.PathValue("buildID"))
	if b == nil {
		writeError(w, http.StatusNotFound, "build %q of template %q not found", r.PathValue("buildID"), tm.alias)
		return nil, nil
	}
	return tm, b
}

// maxLogPage is the most entries one status call returns, as upstream.
const maxLogPage = 100

// buildStatus is GET /templates/{templateID}/builds/{buildID}/status
// (TemplateBuildInfo): the status, then the log from logsOffset (at most
// limit entries, at or above level) and, for a failed build, the reason
// with the log's last lines.
func (s *API) buildStatus(w http.ResponseWriter, r *http.Request, keyID string) {
	tm, b := s.ownedBuild(w, r, keyID)
	if b == nil {
		return
	}
	q := r.URL.Query()
	offset, limit := 0, maxLogPage
	for _, p := range []struct {
		name string
		v    *int
	}{{"logsOffset", &offset}, {"limit", &limit}} {
		if v := q.Get(p.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				writeError(w, http.StatusBadRequest, "%s %q is not a non-negative integer", p.name, v)
				return
			}
			*p.v = n
		}
	}
	level := q.Get("level")
	if _, ok := logLevels[level]; level != "" && !ok {
		writeError(w, http.StatusBadRequest, "level %q is not debug, info, warn or error", level)
		return
	}
	// The status first: once it says the build ended, the log is whole.
	s.tpl.mu.Lock()
	status, reason := b.status, b.reason
	s.tpl.mu.Unlock()
	writeJSON(w, http.StatusOK, e2bapi.TemplateBuildInfo{
		BuildID: b.id, TemplateID: tm.id, Status: status, Reason: reason,
		LogEntries: b.log.page(offset, min(limit, maxLogPage), level), Logs: []string{},
	})
}

// aliasLookup is GET /templates/aliases/{alias} (TemplateAliasResponse):
// 200 for the key's own template or one of the server's (public), 403 for
// another key's, 404 for none, as E2B answers.
func (s *API) aliasLookup(w http.ResponseWriter, r *http.Request, keyID string) {
	alias := r.PathValue("alias")
	status, id, public := s.tpl.aliasStatus(keyID, alias)
	switch status {
	case http.StatusOK:
		writeJSON(w, http.StatusOK, e2bapi.TemplateAliasResponse{TemplateID: id, Public: public})
	case http.StatusForbidden:
		writeError(w, status, "template alias %q belongs to another API key", alias)
	default:
		writeError(w, status, "template alias %q not found", alias)
	}
}

func (s *API) deleteTemplate(w http.ResponseWriter, r *http.Request, keyID string) {
	if status, err := s.tpl.remove(keyID, r.PathValue("templateID")); err != nil {
		writeError(w, status, "%v", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// templateImage is what a create (or a fromTemplate) of name runs for
// keyID: the key's built template, else one of the server's own.
func (s *API) templateImage(keyID, name string) (builtImage, int, error) {
	img, found, status, err := s.tpl.image(keyID, name)
	if found {
		return img, status, err
	}
	image, err := s.opts.Image(name)
	if err != nil {
		return builtImage{}, http.StatusNotFound, err
	}
	return builtImage{image: image}, http.StatusOK, nil
}

// startTemplateIn runs rec's template start and ready commands, if any.
func (s *API) startTemplateIn(r *http.Request, rec *core.Record, img builtImage) error {
	if err := s.tpl.startTemplate(r.Context(), rec.Sandbox, img); err != nil {
		return fmt.Errorf("template %q: %w", rec.TemplateID, err)
	}
	return nil
}
