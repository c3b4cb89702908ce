package e2bserve

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/berth-sh/berth/internal/testing/tartest"
	"github.com/berth-sh/berth/serve/internal/core"
	"github.com/berth-sh/berth/serve/internal/servetest"
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

func newBuildEnv(t testing.TB, mutate func(*core.Options)) buildEnv {
	t.Helper()
	n := &atomic.Int64{}
	p := openLocalLogged(t, slog.New(countingHandler{msg: "build sandbox started", n: n}))
	return buildEnv{newEnvOver(t, p, bashImage, mutate), n}
}

// templateBuilds reads berth_serve_template_builds_total by result.
func (e *testEnv) templateBuilds() map[string]int {
	out := map[string]int{}
	for _, l := range strings.Split(e.Metrics(), "\n") {
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
func (e *testEnv) runTemplateSDK(node, mode, key, alias string, extra ...string) string {
	e.T.Helper()
	return e.RunScript(node, servetest.SDKDir, "template.mjs", "e2b", mode, append([]string{
		"SDK=e2b", "E2B_API_URL=" + e.URL, "E2B_SANDBOX_URL=" + e.URL, "E2B_DOMAIN=localhost",
		"E2B_API_KEY=" + key, "ALIAS=" + alias, "BASE_IMAGE=" + bashImage,
	}, extra...))
}

// recipePayload writes what the OpenEnv recipe embeds in a run command:
// a tar.gz in base64 (of 45 KB, as big as the recipe lets it be), here of
// random bytes so that it does not shrink. It returns the file and the
// sha256 of the blob in it.
func recipePayload(t testing.TB) (file, blobSum string) {
	t.Helper()
	blob := make([]byte, 45_000)
	_, _ = rand.Read(blob)
	archive := gzipped(t, tartest.Build(t, tartest.Dir("env_src"), tartest.File("env_src/blob.bin", string(blob))))
	file = filepath.Join(t.TempDir(), "payload.b64")
	if err := os.WriteFile(file, []byte(base64.StdEncoding.EncodeToString(archive)), 0o600); err != nil {
		t.Fatal(err)
	}
	return file, hashOf(blob)
}

// TestTemplateSDK is the Must-show of E2B template builds: the official
// e2b JS SDK 2.51.0 builds a template from an image, an env, a copied
// file and a run command against the server over the local provider
// (Template.build), checks the alias (Template.exists), creates a sandbox
// from the alias that sees the build's files and env, and builds the same
// template again as a cache hit; another key finds the alias taken and
// cannot use or rebuild it; a failing run command fails Template.build
// with its output; the OpenEnv recipe's E2B path (recipe mode) works as
// the recipe runs it.
func TestTemplateSDK(t *testing.T) {
	node := servetest.NodeSDK(t)
	e := newBuildEnv(t, nil)
	alias := "sdk-" + core.NewID()[:10]
	out := e.runTemplateSDK(node, "build", testKey, alias)
	e.CheckScenario(out,
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
		r := e.Call("GET", "/templates/aliases/"+c.alias, c.key, nil, nil)
		if r.Status != c.status {
			t.Fatalf("alias %s as %s: %d %s, want %d", c.alias, c.key[:10], r.Status, r.Body, c.status)
		}
	}

	e.CheckScenario(e.runTemplateSDK(node, "other", otherKey, alias),
		"ok another key's template: taken, not usable, not rebuildable")
	e.CheckScenario(e.runTemplateSDK(node, "fail", testKey, alias+"-fail"),
		"ok a failing run command fails the build with its output")
	if got := e.templateBuilds(); got["failed"] != 1 {
		t.Fatalf("builds by result = %v, want 1 failed", got)
	}

	// The OpenEnv recipe's E2B path: check, build, create, force.
	payload, sum := recipePayload(t)
	before := e.buildSandboxes.Load()
	e.CheckScenario(e.runTemplateSDK(node, "recipe", testKey, "tb2-demo-"+core.NewID()[:10], "PAYLOAD="+payload, "PAYLOAD_SHA256="+sum),
		"ok the recipe template: alias missing, built as root with an embedded archive",
		"ok a sandbox of the alias with metadata, its server started in the background as root",
		"ok skipCache builds the template again")
	if n := e.buildSandboxes.Load() - before; n != 2 {
		t.Fatalf("the recipe started %d build sandboxes, want 2 (skipCache builds again)", n)
	}
}
