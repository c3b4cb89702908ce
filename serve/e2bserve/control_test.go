package e2bserve

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/serve/internal/core"
)

var idRE = regexp.MustCompile(`^[a-z0-9]{20}$`)

// lifetime is endAt - startedAt of a sandbox, from GET /sandboxes/{id}.
func (e *testEnv) lifetime(id string) time.Duration {
	e.T.Helper()
	r := e.Call("GET", "/sandboxes/"+id, testKey, nil, nil)
	if r.Status != 200 {
		e.T.Fatalf("get %s: %d %s", id, r.Status, r.Body)
	}
	var d e2bapi.SandboxDetail
	r.JSON(e.T, &d)
	return d.EndAt.Sub(d.StartedAt)
}

func near(got, want time.Duration) bool { return got > want-2*time.Second && got < want+2*time.Second }

func TestCreateV1AndV2(t *testing.T) {
	e := newEnv(t, nil, nil)
	// v1 without a timeout lives 15 s; v2 300 s; the body may be chunked.
	r := e.Call("POST", "/sandboxes", testKey, io.MultiReader(strings.NewReader(`{"templateID":"base",`), strings.NewReader(`"metadata":{"user":"ann"},"envVars":{"GREETING":"hello there"},"secure":true,"allow_internet_access":true}`)), nil)
	if r.Status != http.StatusCreated {
		t.Fatalf("v1 create: %d %s", r.Status, r.Body)
	}
	var raw map[string]any
	r.JSON(t, &raw)
	for _, k := range []string{"sandboxID", "templateID", "clientID", "envdVersion", "envdAccessToken", "domain"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("create answer lacks %s: %s", k, r.Body)
		}
	}
	var v1 e2bapi.Sandbox
	r.JSON(t, &v1)
	if !idRE.MatchString(v1.SandboxID) || v1.ClientID != "" || v1.EnvdVersion != EnvdVersion || v1.Domain == nil || *v1.Domain != "localhost" || v1.TemplateID != "base" || len(v1.EnvdAccessToken) < 32 {
		t.Fatalf("v1 answer: %+v", v1)
	}
	if d := e.lifetime(v1.SandboxID); !near(d, 15*time.Second) {
		t.Errorf("v1 default lifetime %v, want 15 s", d)
	}
	v2 := e.Create(testKey, map[string]any{"templateID": "base"})
	if v2.SandboxID == v1.SandboxID || v2.EnvdAccessToken == v1.EnvdAccessToken {
		t.Fatal("two sandboxes share an ID or an access token")
	}
	if d := e.lifetime(v2.SandboxID); !near(d, 300*time.Second) {
		t.Errorf("v2 default lifetime %v, want 300 s", d)
	}
	v3 := e.Create(testKey, map[string]any{"timeout": 42})
	if d := e.lifetime(v3.SandboxID); !near(d, 42*time.Second) {
		t.Errorf("lifetime %v, want the 42 s asked for", d)
	}

	// metadata became labels (plus the launcher's), envVars the environment.
	infos, err := e.P.List(context.Background(), map[string]string{"user": "ann", core.LauncherLabel: core.LauncherValue, core.IDLabel: v1.SandboxID})
	if err != nil || len(infos) != 1 {
		t.Fatalf("backend sandbox with the metadata as labels: %v %v", infos, err)
	}
	sb, err := e.P.Connect(context.Background(), infos[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	res, err := sb.Run(context.Background(), sandbox.Command{Args: []string{"sh", "-c", "echo $GREETING"}})
	if err != nil || string(res.Stdout) != "hello there\n" {
		t.Fatalf("envVars in the sandbox: %q %v", res.Stdout, err)
	}
}

func TestCreateRefusals(t *testing.T) {
	e := newEnv(t, func(o *core.Options) { o.MaxTimeout = time.Hour; o.MaxBodyBytes = 4096 }, nil)
	for _, tc := range []struct {
		name   string
		body   any
		status int
		msg    string
	}{
		{"zero timeout", `{"timeout":0}`, 400, "positive"},
		{"negative timeout", `{"timeout":-5}`, 400, "positive"},
		{"timeout over the maximum", `{"timeout":7200}`, 400, "maximum"},
		{"unknown template", `{"templateID":"nope"}`, 404, "templates: base"},
		{"reserved metadata", `{"metadata":{"berth.serve.id":"forged"}}`, 400, "reserved"},
		{"bad metadata key", `{"metadata":{"a=b":"c"}}`, 400, "key"},
		{"bad env name", `{"envVars":{"A=B":"c"}}`, 400, "environment"},
		{"auto pause", `{"autoPause":true}`, 400, "NotSupported"},
		{"not JSON", `{"templateID":`, 400, "JSON"},
		{"oversized", `{"metadata":{"x":"` + strings.Repeat("a", 5000) + `"}}`, 413, "limit"},
		{"oversized chunked", io.MultiReader(strings.NewReader(`{"metadata":{"x":"`), strings.NewReader(strings.Repeat("a", 5000)+`"}}`)), 413, "limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.Call("POST", "/v2/sandboxes", testKey, tc.body, nil)
			if r.Status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.Status, tc.status, r.Body)
			}
			if _, msg := r.ErrorCode(t); !strings.Contains(msg, tc.msg) {
				t.Fatalf("message %q lacks %q", msg, tc.msg)
			}
		})
	}
	if n := e.C.Live(); n != 0 {
		t.Fatalf("%d sandboxes left by refused creates", n)
	}
}

func TestAPIKeys(t *testing.T) {
	e := newEnv(t, nil, nil)
	for _, key := range []string{"", "wrong_key_cccccccccccccccccccc", testKey + "x", testKey[:len(testKey)-1]} {
		for _, route := range [][2]string{{"POST", "/v2/sandboxes"}, {"GET", "/v2/sandboxes"}, {"GET", "/sandboxes/abc"}, {"DELETE", "/sandboxes/abc"}, {"POST", "/sandboxes/abc/pause"}} {
			r := e.Call(route[0], route[1], key, nil, nil)
			if r.Status != http.StatusUnauthorized {
				t.Fatalf("%s %s with key %q: %d, want 401", route[0], route[1], key, r.Status)
			}
			r.ErrorCode(t)
		}
	}
	// A key sees only its own sandboxes.
	mine := e.Create(testKey, nil)
	if r := e.Call("GET", "/sandboxes/"+mine.SandboxID, otherKey, nil, nil); r.Status != 404 {
		t.Fatalf("another key's get: %d", r.Status)
	}
	if r := e.Call("DELETE", "/sandboxes/"+mine.SandboxID, otherKey, nil, nil); r.Status != 404 {
		t.Fatalf("another key's delete: %d", r.Status)
	}
	if r := e.Call("POST", "/sandboxes/"+mine.SandboxID+"/timeout", otherKey, `{"timeout":1}`, nil); r.Status != 404 {
		t.Fatalf("another key's timeout: %d", r.Status)
	}
	var listed []e2bapi.ListedSandbox
	e.Call("GET", "/v2/sandboxes", otherKey, nil, nil).JSON(t, &listed)
	if len(listed) != 0 {
		t.Fatalf("another key lists %v", listed)
	}
	if r := e.Call("GET", "/sandboxes/"+mine.SandboxID, testKey, nil, nil); r.Status != 200 {
		t.Fatalf("own get: %d", r.Status)
	}
}

func TestGetAndKill(t *testing.T) {
	e := newEnv(t, nil, nil)
	sb := e.Create(testKey, map[string]any{"metadata": map[string]string{"k": "v"}})
	r := e.Call("GET", "/sandboxes/"+sb.SandboxID, testKey, nil, nil)
	var d e2bapi.SandboxDetail
	r.JSON(t, &d)
	if r.Status != 200 || d.SandboxID != sb.SandboxID || d.EnvdAccessToken != sb.EnvdAccessToken || d.Domain == nil || *d.Domain != "localhost" ||
		d.State != "running" || d.Metadata["k"] != "v" || d.EnvdVersion != EnvdVersion || d.TemplateID != "base" {
		t.Fatalf("detail: %d %s", r.Status, r.Body)
	}
	if r := e.Call("DELETE", "/sandboxes/"+sb.SandboxID, testKey, nil, nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if !e.BackendGone(sb.SandboxID) {
		t.Fatal("the backend sandbox outlived its delete")
	}
	// Gone and unknown IDs answer 404 with {"code":404}: the SDK's kill()
	// returns false on exactly that.
	for _, id := range []string{sb.SandboxID, "doesnotexist0000000"} {
		for _, m := range []string{"DELETE", "GET"} {
			r := e.Call(m, "/sandboxes/"+id, testKey, nil, nil)
			if r.Status != 404 {
				t.Fatalf("%s %s: %d", m, id, r.Status)
			}
			r.ErrorCode(t)
		}
	}
}

func TestList(t *testing.T) {
	e := newEnv(t, nil, nil)
	a := e.Create(testKey, map[string]any{"metadata": map[string]string{"job": "x y&z", "n": "1"}})
	b := e.Create(testKey, map[string]any{"metadata": map[string]string{"job": "x y&z", "n": "2"}})
	c := e.Create(testKey, map[string]any{"metadata": map[string]string{"job": "other"}})
	ids := func(r response) []string {
		t.Helper()
		if r.Status != 200 {
			t.Fatalf("list: %d %s", r.Status, r.Body)
		}
		var ls []e2bapi.ListedSandbox
		r.JSON(t, &ls)
		var out []string
		for _, l := range ls {
			if l.State != "running" || l.EnvdVersion != EnvdVersion || l.StartedAt.IsZero() || !l.EndAt.After(l.StartedAt) {
				t.Fatalf("listed sandbox: %+v", l)
			}
			out = append(out, l.SandboxID)
		}
		return out
	}
	// The SDKs encode metadata keys and values, then the pairs, then the
	// query: three levels.
	sdkMeta := func(kv ...string) string {
		v := url.Values{}
		for i := 0; i < len(kv); i += 2 {
			v.Set(url.PathEscape(kv[i]), strings.ReplaceAll(url.QueryEscape(kv[i+1]), "+", "%20"))
		}
		return url.QueryEscape(v.Encode())
	}
	if got := ids(e.Call("GET", "/v2/sandboxes?metadata="+sdkMeta("job", "x y&z"), testKey, nil, nil)); fmt.Sprint(got) != fmt.Sprint([]string{a.SandboxID, b.SandboxID}) {
		t.Fatalf("metadata job=x y&z: %v", got)
	}
	if got := ids(e.Call("GET", "/v2/sandboxes?metadata="+sdkMeta("job", "x y&z", "n", "2"), testKey, nil, nil)); fmt.Sprint(got) != fmt.Sprint([]string{b.SandboxID}) {
		t.Fatalf("metadata job, n=2: %v", got)
	}
	if got := ids(e.Call("GET", "/sandboxes?metadata="+url.QueryEscape("job=other"), testKey, nil, nil)); fmt.Sprint(got) != fmt.Sprint([]string{c.SandboxID}) {
		t.Fatalf("v1 list by metadata: %v", got)
	}
	if got := ids(e.Call("GET", "/v2/sandboxes?state=paused", testKey, nil, nil)); len(got) != 0 {
		t.Fatalf("paused: %v", got)
	}
	if got := ids(e.Call("GET", "/v2/sandboxes?state=running,paused", testKey, nil, nil)); len(got) != 3 {
		t.Fatalf("running,paused: %v", got)
	}
	if r := e.Call("GET", "/v2/sandboxes?state=sleeping", testKey, nil, nil); r.Status != 400 {
		t.Fatalf("bad state: %d", r.Status)
	}
	// Pages of two: X-Next-Token until the last page, which has none.
	var seen []string
	q := "/v2/sandboxes?limit=2"
	for pages := 0; ; pages++ {
		r := e.Call("GET", q, testKey, nil, nil)
		seen = append(seen, ids(r)...)
		next := r.Header.Get("X-Next-Token")
		if next == "" {
			if pages != 1 {
				t.Fatalf("%d pages, want 2", pages+1)
			}
			break
		}
		q = "/v2/sandboxes?limit=2&nextToken=" + url.QueryEscape(next)
	}
	if fmt.Sprint(seen) != fmt.Sprint([]string{a.SandboxID, b.SandboxID, c.SandboxID}) {
		t.Fatalf("paged: %v", seen)
	}
	if r := e.Call("GET", "/v2/sandboxes?nextToken=!!", testKey, nil, nil); r.Status != 400 {
		t.Fatalf("bad token: %d", r.Status)
	}
}

func TestTimeoutConnectResume(t *testing.T) {
	e := newEnv(t, nil, nil)
	sb := e.Create(testKey, map[string]any{"timeout": 100})
	// connect answers 200 with the same sandbox; a shorter timeout does not
	// shorten, a longer one extends.
	for _, path := range []string{"/sandboxes/%s/connect", "/v2/sandboxes/%s/connect"} {
		for _, body := range []string{`{"timeout":10}`, `{}`, ``} {
			r := e.Call("POST", fmt.Sprintf(path, sb.SandboxID), testKey, body, nil)
			var got e2bapi.Sandbox
			r.JSON(t, &got)
			if r.Status != 200 || got.SandboxID != sb.SandboxID || got.EnvdAccessToken != sb.EnvdAccessToken || got.EnvdVersion != EnvdVersion {
				t.Fatalf("connect %s %s: %d %s", path, body, r.Status, r.Body)
			}
		}
		if d := e.lifetime(sb.SandboxID); d < 99*time.Second {
			t.Fatalf("connect shortened the life to %v", d)
		}
		if r := e.Call("POST", fmt.Sprintf(path, "unknown0000000000000"), testKey, `{}`, nil); r.Status != 404 {
			t.Fatalf("connect unknown: %d", r.Status)
		} else {
			r.ErrorCode(t)
		}
	}
	r := e.Call("POST", "/sandboxes/"+sb.SandboxID+"/connect", testKey, `{"timeout":1000}`, nil)
	if r.Status != 200 {
		t.Fatal(r.Status)
	}
	if d := time.Until(e.C.Get(sb.SandboxID).Deadline()); !near(d, 1000*time.Second) {
		t.Fatalf("connect with a longer timeout: %v left", d)
	}
	// Old SDKs resume only what setTimeout could not reach; a running
	// sandbox is 409, which they read as "already running".
	if r := e.Call("POST", "/sandboxes/"+sb.SandboxID+"/resume", testKey, `{"autoPause":false,"timeout":60}`, nil); r.Status != 409 {
		t.Fatalf("resume: %d %s", r.Status, r.Body)
	} else {
		r.ErrorCode(t)
	}
	if r := e.Call("POST", "/sandboxes/unknown0000000000000/resume", testKey, `{"timeout":60}`, nil); r.Status != 404 {
		t.Fatalf("resume unknown: %d", r.Status)
	}
	for _, body := range []string{`{"timeout":0}`, `{}`, `{"timeout":"x"}`} {
		if r := e.Call("POST", "/sandboxes/"+sb.SandboxID+"/timeout", testKey, body, nil); r.Status != 400 {
			t.Fatalf("timeout %s: %d", body, r.Status)
		}
	}
	// setTimeout shortens, and the sandbox is gone after.
	if r := e.Call("POST", "/sandboxes/"+sb.SandboxID+"/timeout", testKey, `{"timeout":1}`, nil); r.Status != 204 {
		t.Fatalf("timeout: %d %s", r.Status, r.Body)
	}
	eventually(t, "sandbox gone after its timeout", func() bool {
		return e.Call("GET", "/sandboxes/"+sb.SandboxID, testKey, nil, nil).Status == 404
	})
	if !e.BackendGone(sb.SandboxID) {
		t.Fatal("backend sandbox outlived the timeout")
	}
}

// lazyProvider never ends sandboxes by itself: their TTL is stretched a
// thousandfold and SetTimeout is ignored, so only the server's timer can
// end them.
type lazyProvider struct{ driver.Provider }

func (p lazyProvider) Create(ctx context.Context, spec driver.Spec) (driver.Sandbox, error) {
	spec.TTL *= 1000
	sb, err := p.Provider.Create(ctx, spec)
	return lazySandbox{sb}, err
}

type lazySandbox struct{ driver.Sandbox }

func (lazySandbox) SetTimeout(context.Context, time.Duration) error { return nil }

func TestServerEnforcesTTL(t *testing.T) {
	e := newEnv(t, nil, func(d driver.Provider) driver.Provider { return lazyProvider{d} })
	short := e.Create(testKey, map[string]any{"timeout": 1})
	long := e.Create(testKey, map[string]any{"timeout": 60})
	if e.BackendGone(short.SandboxID) {
		t.Fatal("sandbox missing right after create")
	}
	eventually(t, "server deletes the sandbox at its timeout", func() bool { return e.BackendGone(short.SandboxID) })
	if r := e.Call("DELETE", "/sandboxes/"+short.SandboxID, testKey, nil, nil); r.Status != 404 {
		t.Fatalf("expired sandbox: %d", r.Status)
	}
	if e.BackendGone(long.SandboxID) {
		t.Fatal("the timer took a sandbox whose timeout has not passed")
	}
	// A timeout set later re-arms the timer.
	if r := e.Call("POST", "/sandboxes/"+long.SandboxID+"/timeout", testKey, `{"timeout":1}`, nil); r.Status != 204 {
		t.Fatal(r.Status)
	}
	eventually(t, "server deletes at the new timeout", func() bool { return e.BackendGone(long.SandboxID) })
}

func TestConcurrencyCap(t *testing.T) {
	e := newEnv(t, func(o *core.Options) { o.MaxSandboxesPerKey = 2 }, nil)
	a := e.Create(testKey, map[string]any{"timeout": 30})
	e.Create(testKey, nil)
	r := e.Call("POST", "/v2/sandboxes", testKey, `{}`, nil)
	if r.Status != http.StatusTooManyRequests {
		t.Fatalf("third create: %d %s", r.Status, r.Body)
	}
	r.ErrorCode(t)
	ra, err := strconv.Atoi(r.Header.Get("Retry-After"))
	if err != nil || ra < 1 || ra > 31 {
		t.Fatalf("Retry-After %q, want the seconds until a slot frees (1-31)", r.Header.Get("Retry-After"))
	}
	// Another key has its own cap; a freed slot is usable again.
	e.Create(otherKey, nil)
	if r := e.Call("DELETE", "/sandboxes/"+a.SandboxID, testKey, nil, nil); r.Status != 204 {
		t.Fatal(r.Status)
	}
	e.Create(testKey, nil)
}

func TestUnsupportedCallsAnswerAtOnce(t *testing.T) {
	e := newEnv(t, nil, nil)
	sb := e.Create(testKey, nil)
	for _, c := range [][2]string{
		{"POST", "/sandboxes/" + sb.SandboxID + "/pause"},
		{"POST", "/sandboxes/" + sb.SandboxID + "/snapshots"},
		{"POST", "/sandboxes/" + sb.SandboxID + "/fork"},
		{"PUT", "/sandboxes/" + sb.SandboxID + "/network"},
		{"POST", "/v3/templates"},
		{"GET", "/templates"},
	} {
		r := e.Call(c[0], c[1], testKey, `{"memory":true}`, nil)
		if r.Status != http.StatusNotImplemented {
			t.Fatalf("%s %s: %d %s", c[0], c[1], r.Status, r.Body)
		}
		if _, msg := r.ErrorCode(t); !strings.Contains(msg, "not supported") {
			t.Fatalf("%s %s: message %q", c[0], c[1], msg)
		}
	}
	r := e.Call("PATCH", "/sandboxes/"+sb.SandboxID, testKey, nil, nil)
	if r.Status != http.StatusMethodNotAllowed {
		t.Fatalf("PATCH: %d", r.Status)
	}
	r.ErrorCode(t)
	if r := e.Call("GET", "/nothing/here", testKey, nil, nil); r.Status != 404 {
		t.Fatalf("unknown route: %d", r.Status)
	} else {
		r.ErrorCode(t)
	}
}

func TestHealthAndMetrics(t *testing.T) {
	e := newEnv(t, nil, nil)
	if r := e.Call("GET", "/health", "", nil, nil); r.Status != 200 {
		t.Fatalf("health: %d", r.Status)
	}
	sb := e.Create(testKey, nil)
	e.Call("GET", "/v2/sandboxes", "bad_key_xxxxxxxxxxxxxxxxxxxx", nil, nil)
	r := e.Call("GET", "/metrics", "", nil, nil)
	body := string(r.Body)
	for _, want := range []string{
		`berth_serve_sandbox_creates_total{result="ok"} 1`,
		`berth_serve_sandboxes_live 1`,
		`berth_serve_auth_failures_total{plane="control"} 1`,
		`berth_serve_requests_total{code="201",plane="control",route="/v2/sandboxes"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	for _, secret := range []string{testKey, otherKey, sb.EnvdAccessToken} {
		if strings.Contains(body, secret) {
			t.Fatal("metrics carry a secret")
		}
	}
}

func TestCloseDeletesSandboxes(t *testing.T) {
	e := newEnv(t, nil, nil)
	a := e.Create(testKey, nil)
	b := e.Create(otherKey, nil)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if !e.BackendGone(a.SandboxID) || !e.BackendGone(b.SandboxID) {
		t.Fatal("sandboxes outlived the server")
	}
	if r := e.Call("POST", "/v2/sandboxes", testKey, `{}`, nil); r.Status == 201 {
		t.Fatal("a closed server created a sandbox")
	}
}
