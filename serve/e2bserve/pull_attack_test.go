package e2bserve

import (
	"net/http"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/internal/testing/testimage"
	"github.com/berth-sh/berth/serve/internal/core"
	"github.com/berth-sh/berth/serve/internal/servetest"
)

// buildFrom runs a template build whose fromImage is ref and returns its
// final status, failing the test unless the start was accepted.
func (e *testEnv) buildFrom(ref string) buildInfo {
	e.T.Helper()
	tid, bid := e.requestTemplate(testKey, "pull-"+core.NewID()[:8])
	if r := e.startTemplateBuild(testKey, tid, bid, e2bapi.TemplateBuildStartV2{FromImage: ref}); r.Status != http.StatusAccepted {
		e.T.Fatalf("start build from %s: %d %s", ref, r.Status, r.Body)
	}
	return e.waitBuild(testKey, tid, bid)
}

// clientText is everything a build's client reads: the reason and the log.
func (bi buildInfo) clientText() string {
	s := logText(bi.LogEntries) + strings.Join(bi.Logs, "\n")
	if bi.Reason != nil {
		s += "\n" + bi.Reason.Message + "\n" + logText(bi.Reason.LogEntries)
	}
	return s
}

// TestAttackPullFromTemplateBuild: a template build whose fromImage names
// a registry on the server's loopback is refused before any connection,
// and the build's status says so without a word of what the service
// would answer. On 5553f78 the pull connected to the service twice (HTTPS,
// then plain HTTP, allowed to loopback) and the build's status carried
// its body: "unexpected status code 403 Forbidden: INTERNAL-SECRET-...".
func TestAttackPullFromTemplateBuild(t *testing.T) {
	e := newLocalEnv(t, nil)
	svc := testimage.ServeInternal(t, "INTERNAL-SECRET-c0ffee")
	bi := e.buildFrom(svc.Addr + "/internal:1")
	if bi.Status != statusError || bi.Reason == nil || !strings.Contains(bi.Reason.Message, servetest.RefusedPull) || bi.Reason.Step != stepBase {
		t.Fatalf("build from the internal service: %s %+v", bi.Status, bi.Reason)
	}
	if strings.Contains(bi.clientText(), svc.Marker) {
		t.Errorf("the client read the internal service's answer: %s", bi.clientText())
	}
	if n := svc.Accepts(); n != 0 {
		t.Errorf("the pull connected to the internal service %d times", n)
	}
}

// TestAttackPullRedirectFromTemplateBuild: a registry the operator allows
// (--allow-registry, as a registry of the operator's own network would
// be) that redirects its blobs to the server's loopback gets its
// manifest read, and the redirect refused: the service gets no connection
// and the client no word of it. On 5553f78 the redirect was followed to
// the service and its body was in the build's status.
func TestAttackPullRedirectFromTemplateBuild(t *testing.T) {
	svc := testimage.ServeInternal(t, "INTERNAL-SECRET-5eed")
	reg := testimage.ServeRedirecting(t, map[string]v1.Image{"tools:1": testimage.Busybox(t)}, "http://"+svc.Addr)
	e := newLocalEnv(t, func(o *core.Options) { o.AllowRegistries = []string{reg} })
	bi := e.buildFrom(reg + "/tools:1")
	if bi.Status != statusError || bi.Reason == nil || bi.Reason.Step != stepBase {
		t.Fatalf("build from the redirecting registry: %s %+v", bi.Status, bi.Reason)
	}
	if strings.Contains(bi.clientText(), svc.Marker) || strings.Contains(bi.clientText(), svc.Addr) {
		t.Errorf("the client read of the redirect's target: %s", bi.clientText())
	}
	if n := svc.Accepts(); n != 0 {
		t.Errorf("the redirect reached the internal service: %d connections", n)
	}
}

// TestTemplateBuildFromAllowedRegistry: --allow-registry lets a build
// pull its base from a loopback registry (over plain HTTP), and the
// same registry without the flag is refused.
func TestTemplateBuildFromAllowedRegistry(t *testing.T) {
	reg := testimage.Serve(t, map[string]v1.Image{"tools:1": testimage.Busybox(t)})
	e := newLocalEnv(t, func(o *core.Options) { o.AllowRegistries = []string{reg} })
	if bi := e.buildFrom(reg + "/tools:1"); bi.Status != statusReady {
		t.Fatalf("build from the allowed registry: %s %+v", bi.Status, bi.Reason)
	}
	e = newLocalEnv(t, nil)
	if bi := e.buildFrom(reg + "/tools:1"); bi.Status != statusError || bi.Reason == nil || !strings.Contains(bi.Reason.Message, servetest.RefusedPull) {
		t.Fatalf("build from a registry not allowed: %s %+v", bi.Status, bi.Reason)
	}
}
