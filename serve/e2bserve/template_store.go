package e2bserve

import (
	"context"
	"crypto/rand"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/serve/internal/core"
)

// templates are the E2B templates built through this server
// (Template.build), each owned by the API key that first named it. They
// live in memory, as long as the server: the images they built stay in
// the provider's store, and rebuilding the same content after a restart
// is the builder's cache hit.
type templates struct {
	s      *API
	opts   core.TemplateBuildOptions
	dir    string // uploads/ and work/; made by the first request
	ownDir bool
	secret []byte // signs upload URLs
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // builds in flight
	checks chan struct{}  // one upload check at a time
	builds *prometheus.CounterVec

	mu      sync.Mutex
	byAlias map[string]*template
	byID    map[string]*template
	keys    map[string]*keyTemplates
	closed  bool
}

// keyTemplates is what one API key holds.
type keyTemplates struct {
	templates int
	active    int              // builds started and not finished
	uploads   map[string]int64 // files hash -> archive bytes
	stored    int64
	pending   int64                 // bytes of uploads in flight
	turns     chan struct{}         // uploads being received
	built     map[string]builtImage // content digest -> image: the key's cache
}

// builtImage is what a sandbox of a built template runs.
type builtImage struct {
	image    string
	startCmd string
	readyCmd string
}

// template is one alias.
type template struct {
	id      string
	alias   string
	keyID   string
	created time.Time
	turn    chan struct{} // builds of the alias take turns (one token)

	// Guarded by templates.mu.
	builds []*build // newest last, at most maxBuildsKept
	tags   map[string]*build
	latest *build // the last ready build
}

// build is one build of a template.
type build struct {
	id      string
	tmpl    *template
	tags    []string
	created time.Time
	log     *buildLog

	// Guarded by templates.mu.
	started bool   // triggered
	status  string // waiting, building, ready, error
	reason  *e2bapi.BuildStatusReason
	digest  string
	out     builtImage
}

// Build statuses, TemplateBuildStatus.
const (
	statusWaiting  = e2bapi.BuildWaiting
	statusBuilding = e2bapi.BuildBuilding
	statusReady    = e2bapi.BuildReady
	statusError    = e2bapi.BuildError
)

// defaultTag is the tag of builds that name none, and the one a create
// by bare alias runs.
const defaultTag = "default"

// Bounds of what the server remembers: builds per template (older
// finished or never started ones are forgotten, the ones tags name
// excepted), tags per build, and built contents per key (the content
// cache; past it an entry is dropped, which costs a rebuild).
const (
	maxBuildsKept   = 16
	maxTags         = 16
	maxContentCache = 256
)

var (
	aliasRe = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,127}$`)
	tagRe   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
)

// parseName splits "alias[:tag]".
func parseName(name string) (alias, tag string, err error) {
	alias, tag, hasTag := strings.Cut(name, ":")
	if !aliasRe.MatchString(alias) {
		return "", "", sandbox.Errorf(sandbox.InvalidArgument, "template name %q: want lowercase letters, digits, '.', '_' and '-' (at most 128), then an optional :tag", name)
	}
	if hasTag && !tagRe.MatchString(tag) {
		return "", "", sandbox.Errorf(sandbox.InvalidArgument, "template tag %q: want letters, digits, '.', '_' and '-'", tag)
	}
	return alias, tag, nil
}

func newTemplates(s *API) (*templates, error) {
	t := &templates{s: s, opts: s.opts.TemplateBuilds, checks: make(chan struct{}, 1), byAlias: map[string]*template{}, byID: map[string]*template{}, keys: map[string]*keyTemplates{}}
	t.builds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_serve_template_builds_total", Help: "Template builds by result (built, cached, failed).",
	}, []string{"result"})
	s.m.MustRegister(t.builds)
	t.secret = make([]byte, 32)
	_, _ = rand.Read(t.secret)
	t.ctx, t.cancel = context.WithCancel(context.Background())
	return t, nil
}

// makeDir makes the directory of uploads and builds on the first template
// request, so that a server nobody builds on writes nothing. Call with mu
// held; every later use of dir follows a request (and mu).
func (t *templates) makeDir() error {
	switch {
	case t.dir != "":
		return nil
	case t.opts.Dir == "":
		d, err := os.MkdirTemp("", "berth-serve-templates-")
		if err != nil {
			return err
		}
		t.dir, t.ownDir = d, true
	default:
		if err := os.MkdirAll(t.opts.Dir, 0o700); err != nil {
			return err
		}
		t.dir = t.opts.Dir
	}
	return nil
}

// close cancels builds in flight, waits for them and removes a directory
// of the server's own.
func (t *templates) close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.cancel()
	t.wg.Wait()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ownDir {
		_ = os.RemoveAll(t.dir)
	}
}

// key returns the key's state, made on first use. Call with mu held.
func (t *templates) key(keyID string) *keyTemplates {
	k := t.keys[keyID]
	if k == nil {
		k = &keyTemplates{uploads: map[string]int64{}, built: map[string]builtImage{}, turns: make(chan struct{}, t.opts.MaxUploadsPerKey)}
		t.keys[keyID] = k
	}
	return k
}

// request is POST /v3/templates: the alias's template (made on first use)
// and a new build of it, waiting for its start. status is the HTTP status
// of err.
func (t *templates) request(keyID, name string, tags []string) (*template, *build, int, error) {
	alias, tag, err := parseName(name)
	if err != nil {
		return nil, nil, http.StatusBadRequest, err
	}
	if tag != "" {
		tags = append(tags, tag)
	}
	if len(tags) > maxTags {
		return nil, nil, http.StatusBadRequest, sandbox.Errorf(sandbox.InvalidArgument, "%d tags; a build takes at most %d", len(tags), maxTags)
	}
	for _, tg := range tags {
		if !tagRe.MatchString(tg) {
			return nil, nil, http.StatusBadRequest, sandbox.Errorf(sandbox.InvalidArgument, "template tag %q: want letters, digits, '.', '_' and '-'", tg)
		}
	}
	if len(tags) == 0 {
		tags = []string{defaultTag}
	}
	slices.Sort(tags)
	tags = slices.Compact(tags)
	if _, ok := t.s.opts.Templates[alias]; ok {
		return nil, nil, http.StatusForbidden, sandbox.Errorf(sandbox.InvalidArgument, "template %q is one of this server's own (--template) and cannot be built", alias)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, nil, http.StatusServiceUnavailable, sandbox.Errorf(sandbox.Unavailable, "the server is shutting down")
	}
	if err := t.makeDir(); err != nil {
		return nil, nil, http.StatusInternalServerError, err
	}
	tm := t.byAlias[alias]
	if tm == nil && t.byID[alias] != nil {
		// Creates name templates by alias or ID: one name, one template.
		return nil, nil, http.StatusConflict, sandbox.Errorf(sandbox.AlreadyExists, "template name %q is the ID of another template", alias)
	}
	if tm != nil && tm.keyID != keyID {
		return nil, nil, http.StatusForbidden, sandbox.Errorf(sandbox.InvalidArgument, "template alias %q belongs to another API key", alias)
	}
	k := t.key(keyID)
	if tm == nil {
		if k.templates >= t.opts.MaxTemplatesPerKey {
			return nil, nil, http.StatusTooManyRequests, sandbox.Errorf(sandbox.ResourceExhausted, "this API key holds %d templates, the most this server keeps per key; delete one (DELETE /templates/{templateID})", k.templates)
		}
		tm = &template{id: core.NewID(), alias: alias, keyID: keyID, created: time.Now(), turn: make(chan struct{}, 1), tags: map[string]*build{}}
		t.byAlias[alias], t.byID[tm.id] = tm, tm
		k.templates++
	}
	b := &build{id: uuid.NewString(), tmpl: tm, tags: tags, created: time.Now(), status: statusWaiting, log: newBuildLog(t.opts.MaxLogBytes)}
	tm.builds = append(tm.builds, b)
	t.forgetOld(tm)
	return tm, b, http.StatusAccepted, nil
}

// forgetOld drops the oldest builds past maxBuildsKept that neither run
// nor are named by a tag. Call with mu held.
func (t *templates) forgetOld(tm *template) {
	for i := 0; len(tm.builds) > maxBuildsKept && i < len(tm.builds); {
		b := tm.builds[i]
		if b.running() || b == tm.latest || slices.Contains(slices.Collect(maps.Values(tm.tags)), b) {
			i++
			continue
		}
		tm.builds = slices.Delete(tm.builds, i, i+1)
	}
}

// running reports whether the build was started and has not ended. Call
// with templates.mu held.
func (b *build) running() bool {
	return b.started && (b.status == statusWaiting || b.status == statusBuilding)
}

// find returns the template by ID or alias, whoever owns it, or nil.
// Call with mu held.
func (t *templates) find(idOrAlias string) *template {
	if tm := t.byID[idOrAlias]; tm != nil {
		return tm
	}
	return t.byAlias[idOrAlias]
}

// owned returns the key's template by ID or alias, or nil.
func (t *templates) owned(keyID, idOrAlias string) *template {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tm := t.find(idOrAlias); tm != nil && tm.keyID == keyID {
		return tm
	}
	return nil
}

// buildOf returns the template's build by ID, or nil.
func (t *templates) buildOf(tm *template, buildID string) *build {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range tm.builds {
		if b.id == buildID {
			return b
		}
	}
	return nil
}

// aliasStatus is the alias route's answer: 200 (the key's own, or one of
// the server's), 403 (another key's), 404 (none).
func (t *templates) aliasStatus(keyID, name string) (int, string, bool) {
	alias, _, _ := strings.Cut(name, ":")
	if _, ok := t.s.opts.Templates[alias]; ok {
		return http.StatusOK, alias, true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	tm := t.byAlias[alias]
	switch {
	case tm == nil:
		return http.StatusNotFound, "", false
	case tm.keyID != keyID:
		return http.StatusForbidden, "", false
	}
	return http.StatusOK, tm.id, false
}

// image returns what a sandbox of the key's template name runs: "alias",
// "alias:tag" or a template ID. found is false when no built template
// has the name (the caller tries the server's own); another key's is
// 403.
func (t *templates) image(keyID, name string) (img builtImage, found bool, status int, err error) {
	alias, tag, _ := strings.Cut(name, ":")
	t.mu.Lock()
	defer t.mu.Unlock()
	tm := t.find(alias)
	if tm == nil {
		return builtImage{}, false, http.StatusNotFound, nil
	}
	if tm.keyID != keyID {
		return builtImage{}, true, http.StatusForbidden, sandbox.Errorf(sandbox.InvalidArgument, "template %q belongs to another API key", name)
	}
	b := tm.tags[tag]
	if tag == "" {
		if b = tm.tags[defaultTag]; b == nil {
			b = tm.latest
		}
	}
	if b == nil {
		return builtImage{}, true, http.StatusNotFound, sandbox.Errorf(sandbox.NotFound, "template %q has no successful build (yet)", name)
	}
	return b.out, true, http.StatusOK, nil
}

// remove forgets the key's template unless a build of it is running. Its
// images stay in the provider's store.
func (t *templates) remove(keyID, idOrAlias string) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tm := t.find(idOrAlias)
	if tm == nil || tm.keyID != keyID {
		return http.StatusNotFound, sandbox.Errorf(sandbox.NotFound, "template %q not found", idOrAlias)
	}
	for _, b := range tm.builds {
		if b.running() {
			return http.StatusConflict, sandbox.Errorf(sandbox.InvalidArgument, "template %q has a build in progress", idOrAlias)
		}
	}
	delete(t.byAlias, tm.alias)
	delete(t.byID, tm.id)
	t.key(keyID).templates--
	return http.StatusNoContent, nil
}
