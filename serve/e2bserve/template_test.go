package e2bserve

import (
	"bytes"
	"crypto/rand"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/internal/testing/tartest"
	"github.com/berth-sh/berth/serve/internal/core"
)

// TestTemplateAlias: the alias route answers 404 for a name nobody holds,
// 403 for another key's, 200 for the key's own and for the server's own
// templates (public); another key can neither build under a held alias
// nor create from it; a template without a successful build creates
// nothing.
func TestTemplateAlias(t *testing.T) {
	e := newLocalEnv(t, nil)
	alias := "mine-" + core.NewID()[:8]
	lookup := func(key, name string) response { return e.Call("GET", "/templates/aliases/"+name, key, nil, nil) }
	if r := lookup(testKey, alias); r.Status != http.StatusNotFound {
		t.Fatalf("unknown alias: %d %s", r.Status, r.Body)
	}
	tid, _ := e.requestTemplate(testKey, alias+":v1")
	var own struct {
		TemplateID string `json:"templateID"`
		Public     bool   `json:"public"`
	}
	r := lookup(testKey, alias)
	r.JSON(t, &own)
	if r.Status != http.StatusOK || own.TemplateID != tid || own.Public {
		t.Fatalf("own alias: %d %s (template %s)", r.Status, r.Body, tid)
	}
	if r := lookup(otherKey, alias); r.Status != http.StatusForbidden {
		t.Fatalf("another key's alias: %d %s", r.Status, r.Body)
	} else if _, msg := r.ErrorCode(t); !strings.Contains(msg, "another API key") {
		t.Fatalf("403 message %q", msg)
	}
	if r := lookup(otherKey, e2bapi.DefaultTemplate); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"public":true`) {
		t.Fatalf("the server's base template: %d %s", r.Status, r.Body)
	}
	for _, c := range []struct {
		key, name string
		status    int
		msg       string
	}{
		{otherKey, alias, http.StatusForbidden, "belongs to another API key"},
		{otherKey, alias + ":v2", http.StatusForbidden, "belongs to another API key"},
		{testKey, e2bapi.DefaultTemplate, http.StatusForbidden, "this server's own"},
		{testKey, "Upper/Case", http.StatusBadRequest, "lowercase"},
		{otherKey, tid, http.StatusConflict, "is the ID of another template"},
	} {
		r := e.Call("POST", "/v3/templates", c.key, map[string]any{"name": c.name}, nil)
		if r.Status != c.status || !strings.Contains(string(r.Body), c.msg) {
			t.Errorf("POST /v3/templates %q: %d %s; want %d %q", c.name, r.Status, r.Body, c.status, c.msg)
		}
	}
	for _, c := range []struct {
		key    string
		status int
		msg    string
	}{{otherKey, http.StatusForbidden, "another API key"}, {testKey, http.StatusNotFound, "no successful build"}} {
		r := e.Call("POST", "/v2/sandboxes", c.key, map[string]any{"templateID": alias}, nil)
		if r.Status != c.status || !strings.Contains(string(r.Body), c.msg) {
			t.Errorf("create from %s as %s: %d %s", alias, c.key[:10], r.Status, r.Body)
		}
	}
	// Another key does not see the template by ID either.
	if r := e.Call("GET", "/templates/"+tid+"/files/"+testHash, otherKey, nil, nil); r.Status != http.StatusNotFound {
		t.Fatalf("file link of another key's template: %d %s", r.Status, r.Body)
	}
	if r := e.Call("DELETE", "/templates/"+tid, otherKey, nil, nil); r.Status != http.StatusNotFound {
		t.Fatalf("delete of another key's template: %d", r.Status)
	}
	// The Python SDK (to 2.10 at least) sends the name as "alias".
	r = e.Call("POST", "/v3/templates", testKey, map[string]any{"alias": alias + "-py", "cpuCount": 2, "memoryMB": 2048}, nil)
	if r.Status != http.StatusAccepted || !strings.Contains(string(r.Body), `"names":["`+alias+`-py"]`) {
		t.Fatalf("POST /v3/templates with alias: %d %s", r.Status, r.Body)
	}
	if r := e.Call("DELETE", "/templates/"+tid, testKey, nil, nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if r := lookup(testKey, alias); r.Status != http.StatusNotFound {
		t.Fatalf("deleted alias: %d", r.Status)
	}
}

// TestTemplateBuildsUnsupported: over a provider that does not build
// images, the build routes answer 501 NotSupported at once; the alias
// route still answers for the server's own templates.
func TestTemplateBuildsUnsupported(t *testing.T) {
	e := newEnv(t, nil, nil)
	r := e.Call("POST", "/v3/templates", testKey, map[string]any{"name": "x"}, nil)
	if r.Status != http.StatusNotImplemented || !strings.Contains(string(r.Body), "NotSupported") {
		t.Fatalf("POST /v3/templates over the fake: %d %s", r.Status, r.Body)
	}
	if r := e.Call("GET", "/templates/aliases/"+e2bapi.DefaultTemplate, testKey, nil, nil); r.Status != http.StatusOK {
		t.Fatalf("alias of the base template: %d %s", r.Status, r.Body)
	}
	if r := e.Call("GET", "/templates/aliases/x", testKey, nil, nil); r.Status != http.StatusNotFound {
		t.Fatalf("unknown alias: %d %s", r.Status, r.Body)
	}
}

// TestTemplateBuildOnce: two builds of one alias started at once build
// once (the second waits for the first, then finds its image); the same
// content under another alias of the key is a cache hit too; neither hit
// starts a sandbox; force builds again; a sandbox of the alias sees what
// the run command wrote.
func TestTemplateBuildOnce(t *testing.T) {
	e := newBuildEnv(t, nil)
	alias := "once-" + core.NewID()[:8]
	run := e2bapi.TemplateStep{Type: "RUN", Args: []string{"echo built > /built.txt; sleep 1"}}
	var ids [2][2]string
	for i := range ids {
		ids[i][0], ids[i][1] = e.requestTemplate(testKey, alias)
	}
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			if r := e.startTemplateBuild(testKey, ids[i][0], ids[i][1], e2bapi.TemplateBuildStartV2{FromImage: bashImage, Steps: []e2bapi.TemplateStep{run}}); r.Status != http.StatusAccepted {
				t.Errorf("start %d: %d %s", i, r.Status, r.Body)
			}
		})
	}
	wg.Wait()
	var logs []string
	for i := range ids {
		bi := e.waitBuild(testKey, ids[i][0], ids[i][1])
		if bi.Status != statusReady {
			t.Fatalf("build %d: %s %+v", i, bi.Status, bi.Reason)
		}
		logs = append(logs, logText(bi.LogEntries))
	}
	if got := e.templateBuilds(); got["built"] != 1 || got["cached"] != 1 {
		t.Fatalf("builds by result = %v, want 1 built, 1 cached\n%s", got, strings.Join(logs, "\n---\n"))
	}
	if n := e.buildSandboxes.Load(); n != 1 {
		t.Fatalf("%d build sandboxes, want 1", n)
	}
	if !strings.Contains(strings.Join(logs, ""), "cache hit") {
		t.Fatalf("no cache hit in the logs:\n%s", strings.Join(logs, "\n---\n"))
	}

	// The same content under another alias: the key's content cache.
	tid, bid := e.buildTemplate(testKey, alias+"-twin", run)
	if bi := e.waitBuild(testKey, tid, bid); bi.Status != statusReady || !strings.Contains(logText(bi.LogEntries), "cache hit") {
		t.Fatalf("twin: %s\n%s", bi.Status, logText(bi.LogEntries))
	}
	// force: a new build, whatever is cached.
	tid, bid = e.requestTemplate(testKey, alias)
	if r := e.startTemplateBuild(testKey, tid, bid, e2bapi.TemplateBuildStartV2{FromImage: bashImage, Force: true, Steps: []e2bapi.TemplateStep{run}}); r.Status != http.StatusAccepted {
		t.Fatalf("forced start: %d %s", r.Status, r.Body)
	}
	if bi := e.waitBuild(testKey, tid, bid); bi.Status != statusReady {
		t.Fatalf("forced: %s %+v", bi.Status, bi.Reason)
	}
	if got, n := e.templateBuilds(), e.buildSandboxes.Load(); got["built"] != 2 || got["cached"] != 2 || n != 2 {
		t.Fatalf("after twin and force: builds %v, sandboxes %d; want 2 built, 2 cached, 2 sandboxes", got, n)
	}

	sb := e.Create(testKey, map[string]any{"templateID": alias})
	if out, err := e.shellIn(sb, "cat /built.txt"); err != nil || out != "built\n" {
		t.Fatalf("a sandbox of %s reads %q, %v", alias, out, err)
	}
	if r := e.Call("DELETE", "/sandboxes/"+sb.SandboxID, testKey, nil, nil); r.Status != http.StatusNoContent {
		t.Fatalf("kill: %d", r.Status)
	}
}

// TestTemplateFailedBuild: a failing run command ends the build as
// failed, with the step, the exit status and the end of its output in the
// reason, and its lines in the log, paged by logsOffset and filtered by
// level as the status route documents.
func TestTemplateFailedBuild(t *testing.T) {
	e := newLocalEnv(t, nil)
	tid, bid := e.buildTemplate(testKey, "fails-"+core.NewID()[:8],
		e2bapi.TemplateStep{Type: "ENV", Args: []string{"WHO", "berth"}},
		e2bapi.TemplateStep{Type: "RUN", Args: []string{"for i in 1 2 3; do echo line$i; done; echo last words of $WHO >&2; exit 3"}})
	bi := e.waitBuild(testKey, tid, bid)
	if bi.Status != statusError || bi.Reason == nil {
		t.Fatalf("status %s, reason %+v", bi.Status, bi.Reason)
	}
	if bi.Reason.Step != "2" || !strings.Contains(bi.Reason.Message, "exit status 3") || !strings.Contains(bi.Reason.Message, "step 2") {
		t.Fatalf("reason %+v", bi.Reason)
	}
	if tail := logText(bi.Reason.LogEntries); !strings.Contains(tail, "last words of berth\n") {
		t.Fatalf("the reason's log tail has no output:\n%s", tail)
	}
	text := logText(bi.LogEntries)
	for _, want := range []string{"[step 2] RUN for i in 1 2 3", "line1\n", "line3\n", "last words of berth\n"} {
		if !strings.Contains(text, want) {
			t.Fatalf("no %q in the log:\n%s", want, text)
		}
	}
	for _, le := range bi.LogEntries {
		if le.Message == "line2" && le.Step != "2" {
			t.Fatalf("output line of step 2 is marked step %q", le.Step)
		}
	}
	page := func(q string) []logEntry {
		var v buildInfo
		r := e.Call("GET", "/templates/"+tid+"/builds/"+bid+"/status?"+q, testKey, nil, nil)
		r.JSON(t, &v)
		return v.LogEntries
	}
	if got := page("logsOffset=1&limit=2"); len(got) != 2 || got[0] != bi.LogEntries[1] {
		t.Fatalf("page 1..3 = %+v", got)
	}
	if got := page("logsOffset=100000"); len(got) != 0 {
		t.Fatalf("past the end: %+v", got)
	}
	if got := page("level=error"); len(got) != 1 || !strings.Contains(got[0].Message, "exit status 3") {
		t.Fatalf("level=error: %+v", got)
	}
	if r := e.Call("GET", "/templates/"+tid+"/builds/"+bid+"/status?logsOffset=-1", testKey, nil, nil); r.Status != http.StatusBadRequest {
		t.Fatalf("negative offset: %d", r.Status)
	}
	// A started build is not started again.
	if r := e.startTemplateBuild(testKey, tid, bid, e2bapi.TemplateBuildStartV2{FromImage: bashImage}); r.Status != http.StatusBadRequest {
		t.Fatalf("second start: %d %s", r.Status, r.Body)
	}
}

// TestTemplateStartCmd: a template's start command runs in every sandbox
// of it, which create answers once the ready command succeeds; a ready
// command that never succeeds fails the build at its finalize step.
func TestTemplateStartCmd(t *testing.T) {
	e := newLocalEnv(t, func(o *core.Options) { o.TemplateBuilds.ReadyTimeout = 3 * time.Second })
	alias := "server-" + core.NewID()[:8]
	tid, bid := e.requestTemplate(testKey, alias)
	start := e2bapi.TemplateBuildStartV2{FromImage: bashImage, StartCmd: "sleep 1; echo $$ > /tmp/started; exec sleep 1000", ReadyCmd: "test -s /tmp/started"}
	if r := e.startTemplateBuild(testKey, tid, bid, start); r.Status != http.StatusAccepted {
		t.Fatalf("start: %d %s", r.Status, r.Body)
	}
	if bi := e.waitBuild(testKey, tid, bid); bi.Status != statusReady || !strings.Contains(logText(bi.LogEntries), "[finalize]") {
		t.Fatalf("build: %s %+v\n%s", bi.Status, bi.Reason, logText(bi.LogEntries))
	}
	sb := e.Create(testKey, map[string]any{"templateID": alias})
	if out, err := e.shellIn(sb, "test -s /tmp/started && ps | grep -c '[s]leep 1000'"); err != nil || strings.TrimSpace(out) != "1" {
		t.Fatalf("the start command is not running in the new sandbox: %q %v", out, err)
	}
	e.Call("DELETE", "/sandboxes/"+sb.SandboxID, testKey, nil, nil)

	tid, bid = e.requestTemplate(testKey, alias+"-never")
	start = e2bapi.TemplateBuildStartV2{FromImage: bashImage, StartCmd: "echo starting up; sleep 1000", ReadyCmd: "false"}
	if r := e.startTemplateBuild(testKey, tid, bid, start); r.Status != http.StatusAccepted {
		t.Fatalf("start: %d %s", r.Status, r.Body)
	}
	bi := e.waitBuild(testKey, tid, bid)
	if bi.Status != statusError || bi.Reason.Step != stepFinalize || !strings.Contains(bi.Reason.Message, "did not succeed within 3s") || !strings.Contains(bi.Reason.Message, "starting up") {
		t.Fatalf("never ready: %s %+v", bi.Status, bi.Reason)
	}
}

// TestTemplateBounds: every bound refuses with a clear error: steps per
// template, upload size, files per upload, unpacked size, builds going
// per key (429 with Retry-After), templates per key, build time; a build
// log past its limit keeps its head and its last lines.
func TestTemplateBounds(t *testing.T) {
	e := newLocalEnv(t, func(o *core.Options) {
		o.TemplateBuilds = core.TemplateBuildOptions{MaxSteps: 2, MaxUploadBytes: 2048, MaxStoredBytesPerKey: 4096, MaxFiles: 3,
			MaxUnpackedBytes: 4096, MaxLogBytes: 300, BuildTimeout: 4 * time.Second, MaxConcurrentBuildsPerKey: 1, MaxTemplatesPerKey: 3}
	})
	name := "bounds-" + core.NewID()[:8]
	want := func(what string, r response, status int, msg string) {
		t.Helper()
		if r.Status != status || !strings.Contains(string(r.Body), msg) {
			t.Fatalf("%s: %d %s; want %d with %q", what, r.Status, r.Body, status, msg)
		}
	}
	tid, bid := e.requestTemplate(testKey, name+"-a")
	true1 := e2bapi.TemplateStep{Type: "RUN", Args: []string{"true"}}
	want("3 steps", e.startTemplateBuild(testKey, tid, bid, e2bapi.TemplateBuildStartV2{FromImage: bashImage, Steps: []e2bapi.TemplateStep{true1, true1, true1}}), http.StatusBadRequest, "at most 2")

	// Uploads go to the other key's template, whose count is its own.
	otid, _ := e.requestTemplate(otherKey, name+"-files")
	random := make([]byte, 3000)
	_, _ = rand.Read(random)
	_, r := e.upload(otherKey, otid, gzipped(t, tartest.Build(t, tartest.File("big.bin", string(random)))))
	want("upload over 2 KiB", r, http.StatusRequestEntityTooLarge, "limit of 2 KiB per upload")
	// The same sent chunked, with no length to refuse it by up front.
	big := gzipped(t, tartest.Build(t, tartest.File("big.bin", string(random))))
	_, u, _ := e.fileLink(otherKey, otid, hashOf(big))
	req, err := http.NewRequest("PUT", u, io.MultiReader(bytes.NewReader(big)))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength, req.TransferEncoding = -1, []string{"chunked"}
	if res, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		want("chunked upload over 2 KiB", response{Status: res.StatusCode, Body: b}, http.StatusRequestEntityTooLarge, "limit of 2 KiB per upload")
	}
	_, r = e.upload(otherKey, otid, gzipped(t, tartest.Build(t, tartest.File("a", "1"), tartest.File("b", "2"), tartest.File("c", "3"), tartest.File("d", "4"))))
	want("4 files", r, http.StatusRequestEntityTooLarge, "more than the 3 files")
	_, r = e.upload(otherKey, otid, gzipped(t, tartest.Build(t, tartest.File("zeros", strings.Repeat("\x00", 5000)))))
	want("5000 bytes unpacked", r, http.StatusRequestEntityTooLarge, "unpacked pass this server's limit of 4 KiB")
	// What a key keeps uploaded is bounded too (4 KiB here).
	stored := 0
	for i := range 6 {
		chunk := make([]byte, 1000)
		_, _ = rand.Read(chunk)
		_, r = e.upload(otherKey, otid, gzipped(t, tartest.Build(t, tartest.File("f", string(chunk)))))
		if r.Status != http.StatusOK {
			want("upload past 4 KiB stored", r, http.StatusInsufficientStorage, "4 KiB this server keeps per key")
			break
		}
		if stored++; i == 5 {
			t.Fatal("6 uploads of 1000 random bytes fit in 4 KiB")
		}
	}
	if stored < 2 {
		t.Fatalf("only %d uploads stored before the limit", stored)
	}

	// One build at a time per key: the second is 429 with Retry-After,
	// and the first ends at the build time limit.
	tid, bid = e.buildTemplate(testKey, name+"-slow", e2bapi.TemplateStep{Type: "RUN", Args: []string{"echo sleeping; sleep 60"}})
	tid2, bid2 := e.requestTemplate(testKey, name+"-b")
	r = e.startTemplateBuild(testKey, tid2, bid2, e2bapi.TemplateBuildStartV2{FromImage: bashImage, Steps: []e2bapi.TemplateStep{true1}})
	want("a second build going", r, http.StatusTooManyRequests, "builds going")
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	started := time.Now()
	bi := e.waitBuild(testKey, tid, bid)
	if bi.Status != statusError || !strings.Contains(bi.Reason.Message, "longer than this server's limit of 4s") || bi.Reason.Step == "" {
		t.Fatalf("slow build: %s %+v", bi.Status, bi.Reason)
	}
	if d := time.Since(started); d > 30*time.Second {
		t.Fatalf("the timed-out build took %v to end", d)
	}
	want("a fourth template", e.Call("POST", "/v3/templates", testKey, map[string]any{"name": name + "-c"}, nil), http.StatusTooManyRequests, "holds 3 templates")

	// A log past 300 bytes: the head, a line saying what was left out,
	// then the last lines.
	r = e.startTemplateBuild(testKey, tid2, bid2, e2bapi.TemplateBuildStartV2{FromImage: bashImage, Steps: []e2bapi.TemplateStep{{Type: "RUN", Args: []string{"i=0; while [ $i -lt 200 ]; do i=$((i+1)); echo out-$i; done"}}}})
	want("the log build", r, http.StatusAccepted, "")
	bi = e.waitBuild(testKey, tid2, bid2)
	text := logText(bi.LogEntries)
	if bi.Status != statusReady || !strings.Contains(text, "log lines left out") || !strings.Contains(text, "out-200\n") || strings.Contains(text, "out-100\n") {
		t.Fatalf("long log: %s\n%s", bi.Status, text)
	}
	if len(text) > 300+logTailLines*80+500 {
		t.Fatalf("the log kept %d bytes", len(text))
	}
	if infos, err := e.P.List(t.Context(), nil); err != nil || len(infos) != 0 {
		t.Fatalf("sandboxes left: %+v %v", infos, err)
	}
}

// TestTemplateFromTemplate: a template built from another (fromTemplate)
// starts from its image; a run command with a user runs as that user and
// leaves the next step's user alone; another key's template is not a
// base.
func TestTemplateFromTemplate(t *testing.T) {
	e := newLocalEnv(t, nil)
	parent := "parent-" + core.NewID()[:8]
	tid, bid := e.buildTemplate(testKey, parent, e2bapi.TemplateStep{Type: "RUN", Args: []string{"echo from the parent > /parent.txt"}})
	if bi := e.waitBuild(testKey, tid, bid); bi.Status != statusReady {
		t.Fatalf("parent: %s %+v", bi.Status, bi.Reason)
	}
	child := parent + "-child"
	steps := []e2bapi.TemplateStep{
		{Type: "RUN", Args: []string{"cat /parent.txt > /tmp/child.txt; id -u > /tmp/uid-step", "nobody"}},
		{Type: "RUN", Args: []string{"id -u > /tmp/uid-after"}},
	}
	otid, obid := e.requestTemplate(otherKey, "other-"+child)
	if r := e.startTemplateBuild(otherKey, otid, obid, e2bapi.TemplateBuildStartV2{FromTemplate: parent, Steps: steps}); r.Status != http.StatusForbidden {
		t.Fatalf("another key's template as a base: %d %s", r.Status, r.Body)
	}
	tid, bid = e.requestTemplate(testKey, child)
	if r := e.startTemplateBuild(testKey, tid, bid, e2bapi.TemplateBuildStartV2{FromTemplate: parent, Steps: steps}); r.Status != http.StatusAccepted {
		t.Fatalf("start: %d %s", r.Status, r.Body)
	}
	if bi := e.waitBuild(testKey, tid, bid); bi.Status != statusReady {
		t.Fatalf("child: %s %+v\n%s", bi.Status, bi.Reason, logText(bi.LogEntries))
	}
	sb := e.Create(testKey, map[string]any{"templateID": child})
	defer e.Call("DELETE", "/sandboxes/"+sb.SandboxID, testKey, nil, nil)
	out, err := e.shellIn(sb, "cat /tmp/child.txt /tmp/uid-step /tmp/uid-after")
	if err != nil || out != "from the parent\n65534\n0\n" {
		t.Fatalf("the child's sandbox reads %q, %v", out, err)
	}
}
