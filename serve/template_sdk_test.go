package serve

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// countingHandler counts the log records whose message is msg (the local
// provider's "build sandbox started": one per build that ran).
type countingHandler struct {
	msg string
	n   *atomic.Int64
}

func (h countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.n.Add(1)
	}
	return nil
}
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countingHandler) WithGroup(string) slog.Handler      { return h }

// buildEnv is a server over the local provider whose build sandboxes are
// counted.
type buildEnv struct {
	*testEnv
	buildSandboxes *atomic.Int64
}

func newBuildEnv(t testing.TB, mutate func(*Options)) buildEnv {
	t.Helper()
	n := &atomic.Int64{}
	p := openLocalLogged(t, slog.New(countingHandler{msg: "build sandbox started", n: n}))
	return buildEnv{newEnvOver(t, p, bashImage, mutate), n}
}

// templateBuilds reads berth_serve_template_builds_total by result.
func (e *testEnv) templateBuilds() map[string]int {
	out := map[string]int{}
	for _, l := range strings.Split(e.metrics(), "\n") {
		rest, ok := strings.CutPrefix(l, `berth_serve_template_builds_total{result="`)
		if !ok {
			continue
		}
		res, num, _ := strings.Cut(rest, `"} `)
		out[res], _ = strconv.Atoi(num)
	}
	return out
}

// runTemplateSDK runs template.mjs in mode as key for alias.
func (e *testEnv) runTemplateSDK(node, mode, key, alias string) string {
	e.t.Helper()
	return e.runScript(node, sdkDir, "template.mjs", "e2b", mode, []string{
		"SDK=e2b", "E2B_API_URL=" + e.url, "E2B_SANDBOX_URL=" + e.url, "E2B_DOMAIN=localhost",
		"E2B_API_KEY=" + key, "ALIAS=" + alias, "BASE_IMAGE=" + bashImage,
	})
}

// TestTemplateSDK is the Must-show of E2B template builds: the official
// e2b JS SDK 2.51.0 builds a template from an image, an env, a copied
// file and a run command against the server over the local provider
// (Template.build), checks the alias (Template.exists), creates a sandbox
// from the alias that sees the build's files and env, and builds the same
// template again as a cache hit; another key finds the alias taken and
// cannot use or rebuild it; a failing run command fails Template.build
// with its output.
func TestTemplateSDK(t *testing.T) {
	node := nodeSDK(t)
	e := newBuildEnv(t, nil)
	alias := "sdk-" + newID()[:10]
	out := e.runTemplateSDK(node, "build", testKey, alias)
	e.checkScenario(out,
		"ok Template.build from an image with a copy and a run command",
		"ok alias check: exists, and a missing alias does not",
		"ok a sandbox from the alias runs a command that sees the build",
		"ok the same template again is a cache hit, its file already uploaded",
	)
	if got := e.templateBuilds(); got["built"] != 1 || got["cached"] != 1 {
		t.Fatalf("builds by result = %v, want 1 built and 1 cached", got)
	}
	if n := e.buildSandboxes.Load(); n != 1 {
		t.Fatalf("%d build sandboxes started, want 1 (the cache hit starts none)", n)
	}
	for _, c := range []struct {
		key, alias string
		status     int
	}{{testKey, alias, http.StatusOK}, {otherKey, alias, http.StatusForbidden}, {testKey, "missing-" + alias, http.StatusNotFound}} {
		r := e.call("GET", "/templates/aliases/"+c.alias, c.key, nil, nil)
		if r.status != c.status {
			t.Fatalf("alias %s as %s: %d %s, want %d", c.alias, c.key[:10], r.status, r.body, c.status)
		}
	}

	e.checkScenario(e.runTemplateSDK(node, "other", otherKey, alias),
		"ok another key's template: taken, not usable, not rebuildable")
	e.checkScenario(e.runTemplateSDK(node, "fail", testKey, alias+"-fail"),
		"ok a failing run command fails the build with its output")
	if got := e.templateBuilds(); got["failed"] != 1 {
		t.Fatalf("builds by result = %v, want 1 failed", got)
	}
}
