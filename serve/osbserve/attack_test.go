package osbserve

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/berth-sh/berth/serve/internal/core"
	"github.com/berth-sh/berth/serve/internal/servetest"
	"github.com/berth-sh/berth/serve/opensandbox"
)

// TestOpenSandboxKeysOwnTheirSandboxes: another API key cannot see, list,
// look up, renew, proxy to or delete a key's OpenSandbox sandbox; to it
// the sandbox does not exist. Checked by dropping the key's filter from
// owned(): GET and DELETE by the other key then answered 200 and 204.
func TestOpenSandboxKeysOwnTheirSandboxes(t *testing.T) {
	e := newEnv(t, nil, nil)
	sb := e.OSBCreate(testKey, servetest.OSBImageBody(nil))
	base, hdr := e.OSBEndpoint(testKey, sb.ID, opensandbox.ExecdPort)
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/sandboxes/" + sb.ID},
		{"DELETE", "/v1/sandboxes/" + sb.ID},
		{"GET", "/v1/sandboxes/" + sb.ID + "/endpoints/44772"},
		{"POST", "/v1/sandboxes/" + sb.ID + "/renew-expiration"},
		{"GET", base + "/ping"},
	} {
		var body any
		if c.method == "POST" {
			body = map[string]string{"expiresAt": "2099-01-01T00:00:00Z"}
		}
		r := e.OSBCall(c.method, c.path, otherKey, body, nil)
		if r.Status != http.StatusNotFound {
			t.Errorf("%s %s with another key: %d %s", c.method, c.path, r.Status, r.Body)
		}
	}
	var list opensandbox.ListResponse
	e.OSBCall("GET", "/v1/sandboxes", otherKey, nil, nil).JSON(t, &list)
	if len(list.Items) != 0 || list.Pagination.TotalItems != 0 {
		t.Fatalf("another key lists %+v", list)
	}
	// Its own key still has it, running.
	if r := e.Execd("GET", base, hdr, "", "/ping", nil); r.Status != http.StatusOK {
		t.Fatalf("the owner's ping: %d %s", r.Status, r.Body)
	}
	e.OSBCall("GET", "/v1/sandboxes", testKey, nil, nil).JSON(t, &list)
	if len(list.Items) != 1 || list.Items[0].ID != sb.ID {
		t.Fatalf("the owner lists %+v", list)
	}
	// Credentials: none, a wrong key, a wrong token.
	for name, h := range map[string]map[string]string{
		"no credentials": {},
		"a wrong key":    {opensandbox.APIKeyHeader: "test_key_cccccccccccccccccccccccc"},
		"a wrong token":  {opensandbox.AccessTokenHeader: strings.Repeat("0", 64)},
	} {
		if r := e.Call("GET", base+"/ping", "", nil, h); r.Status != http.StatusUnauthorized {
			t.Errorf("ping with %s: %d %s", name, r.Status, r.Body)
		}
	}
	if r := e.Call("GET", "/v1/sandboxes/"+sb.ID, "", nil, nil); r.Status != http.StatusUnauthorized || !strings.Contains(string(r.Body), opensandbox.CodeMissingAPIKey) {
		t.Fatalf("get without a key: %d %s", r.Status, r.Body)
	}
	// The E2B API key header is not the OpenSandbox one.
	if r := e.Call("GET", "/v1/sandboxes/"+sb.ID, testKey, nil, nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("get with X-API-KEY only: %d %s", r.Status, r.Body)
	}
	if r := e.OSBCall("DELETE", "/v1/sandboxes/"+sb.ID, testKey, nil, nil); r.Status != http.StatusNoContent {
		t.Fatalf("owner's delete: %d %s", r.Status, r.Body)
	}
}

// TestOpenSandboxProxyCannotReachAnotherSandbox: a sandbox's execd token,
// or its owner's key, opens that sandbox's proxy path only. A token sent to
// another sandbox's path is refused; paths that climb out of a proxy path
// with "..", raw or encoded, reach no sandbox; ports other than execd's
// and egress's are not served. The victim's file must be untouched.
// Checked by dropping the token comparison, then the key's owner check,
// from proxyAuthorized: each time an attack planted the file.
func TestOpenSandboxProxyCannotReachAnotherSandbox(t *testing.T) {
	e := newEnv(t, nil, nil)
	attacker := e.OSBCreate(otherKey, servetest.OSBImageBody(nil))
	victim := e.OSBCreate(testKey, servetest.OSBImageBody(nil))
	abase, ahdr := e.OSBEndpoint(otherKey, attacker.ID, opensandbox.ExecdPort)
	vbase, vhdr := e.OSBEndpoint(testKey, victim.ID, opensandbox.ExecdPort)
	write := map[string]any{"command": "echo planted > /tmp/owned"}
	if r := e.Execd("POST", vbase, vhdr, "", "/command", map[string]any{"command": "echo mine > /tmp/owned"}); r.Status != http.StatusOK {
		t.Fatalf("victim's own command: %d %s", r.Status, r.Body)
	}
	victimPath := "/sandboxes/" + victim.ID + "/proxy/44772"
	attacks := []struct {
		name string
		path string
		hdr  map[string]string
	}{
		{"attacker's token on the victim's path", victimPath + "/command", ahdr},
		{"attacker's token and key on the victim's path", victimPath + "/command", map[string]string{
			opensandbox.AccessTokenHeader: ahdr[opensandbox.AccessTokenHeader], opensandbox.APIKeyHeader: otherKey}},
		{"the /v1 form of the victim's path", "/v1" + victimPath + "/command", ahdr},
		{"dot-dot out of the attacker's path", abase + "/../../" + victim.ID + "/proxy/44772/command", ahdr},
		{"encoded dot-dot", abase + "/..%2F..%2F" + victim.ID + "%2Fproxy%2F44772%2Fcommand", ahdr},
		{"encoded slash in the id", "/sandboxes/" + attacker.ID + "%2F..%2F" + victim.ID + "/proxy/44772/command", ahdr},
		{"the envd port of the attacker's own sandbox", "/sandboxes/" + attacker.ID + "/proxy/49983/command", ahdr},
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, a := range attacks {
		req, _ := http.NewRequest("POST", e.URL+a.path, strings.NewReader(`{"command":"echo planted > /tmp/owned"}`))
		req.URL.Opaque = a.path // send the path as written, encodings and dots kept
		for k, v := range a.hdr {
			req.Header.Set(k, v)
		}
		res, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := servetest.ReadAll(t, res.Body)
		res.Body.Close()
		if res.StatusCode == http.StatusOK {
			t.Errorf("%s: 200 %s", a.name, body)
		}
		if loc := res.Header.Get("Location"); loc != "" {
			// A cleaned-path redirect must not lead into the victim either.
			if r := e.OSBCall("POST", loc, "", write, a.hdr); r.Status == http.StatusOK {
				t.Errorf("%s: the redirect to %s ran the command: %s", a.name, loc, r.Body)
			}
		}
	}
	// The attacker's own token still works on its own path (the attacks
	// were refused for what they named, not for a broken token).
	if r := e.Execd("POST", abase, ahdr, "", "/command", write); r.Status != http.StatusOK {
		t.Fatalf("attacker's own command: %d %s", r.Status, r.Body)
	}
	r := e.Execd("GET", vbase, vhdr, "", "/files/download?path=/tmp/owned", nil)
	if r.Status != http.StatusOK || string(r.Body) != "mine\n" {
		t.Fatalf("the victim's file: %d %q", r.Status, r.Body)
	}
}

// TestOpenSandboxBoundsAndPaths: bodies past the limits are 413 (create,
// command, upload), and file paths with ".." are refused.
func TestOpenSandboxBoundsAndPaths(t *testing.T) {
	e := newEnv(t, func(o *core.Options) { o.MaxBodyBytes = 4096; o.MaxUploadBytes = 1 << 20 }, nil)
	big := strings.Repeat("x", 8192)
	if r := e.OSBCall("POST", "/v1/sandboxes", testKey, servetest.OSBImageBody(map[string]any{"metadata": map[string]string{"k": big}}), nil); r.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("large create: %d %s", r.Status, r.Body)
	}
	sb := e.OSBCreate(testKey, servetest.OSBImageBody(nil))
	base, hdr := e.OSBEndpoint(testKey, sb.ID, opensandbox.ExecdPort)
	if r := e.Execd("POST", base, hdr, "", "/command", map[string]any{"command": "true", "envs": map[string]string{"K": big}}); r.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("large command: %d %s", r.Status, r.Body)
	}
	upload := func(path string, size int) servetest.Response {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		mf, _ := mw.CreateFormFile("metadata", "metadata")
		mf.Write([]byte(`{"path":"` + path + `"}`))
		ff, _ := mw.CreateFormFile("file", "f")
		ff.Write(bytes.Repeat([]byte{'a'}, size))
		mw.Close()
		h := map[string]string{"Content-Type": mw.FormDataContentType()}
		for k, v := range hdr {
			h[k] = v
		}
		return e.Call("POST", base+"/files/upload", "", &buf, h)
	}
	if r := upload("/tmp/ok.bin", 1000); r.Status != http.StatusOK {
		t.Fatalf("small upload: %d %s", r.Status, r.Body)
	}
	if r := upload("/tmp/big.bin", 2<<20); r.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("2 MiB upload under a 1 MiB limit: %d %s", r.Status, r.Body)
	}
	if r := upload("/tmp/../../etc/x", 10); r.Status != http.StatusBadRequest {
		t.Fatalf("upload to a dot-dot path: %d %s", r.Status, r.Body)
	}
	if r := e.Execd("GET", base, hdr, "", "/files/download?path=../../etc/passwd", nil); r.Status != http.StatusBadRequest {
		t.Fatalf("download of a dot-dot path: %d %s", r.Status, r.Body)
	}
	if r := e.Execd("GET", base, hdr, "", "/files/download?path=/tmp/ok.bin", nil); r.Status != http.StatusOK || len(r.Body) != 1000 {
		t.Fatalf("download: %d %d bytes", r.Status, len(r.Body))
	}
	if r := e.Execd("GET", base, hdr, "", "/files/download?path=/tmp/missing", nil); r.Status != http.StatusNotFound || !strings.Contains(string(r.Body), opensandbox.CodeFileNotFound) {
		t.Fatalf("download of a missing file: %d %s", r.Status, r.Body)
	}
}

// TestAttackOpenSandboxImagePrefixBoundary: an --opensandbox-image prefix
// allows references that continue it at a boundary (a path element, a tag,
// a digest) and no other registry or repository whose name merely starts
// with it. On 0bdf642 the prefix was a plain string prefix, and
// "registry.example.evil.com/app:1" and "registry.exampleevil/app:1" were
// created (and would have been pulled) under --opensandbox-image
// registry.example.
func TestAttackOpenSandboxImagePrefixBoundary(t *testing.T) {
	p, rec := servetest.HostFake(t)
	e := newEnvOver(t, p, "host", func(o *core.Options) {
		o.OpenSandbox.Images = []string{"registry.example", "registry.example/app", "docker.io/library/"}
	})
	for _, c := range []struct {
		uri     string
		allowed bool
	}{
		{"registry.example/app:1", true},
		{"registry.example/app@sha256:" + strings.Repeat("a", 64), true},
		{"registry.example:5000/x", true},
		{"docker.io/library/python:3.12", true},
		{"registry.example.evil.com/app:1", false},
		{"registry.exampleevil/app:1", false},
		{"docker.io/libraryevil/python", false},
	} {
		body := map[string]any{"image": map[string]any{"uri": c.uri}, "entrypoint": []string{"tail", "-f", "/dev/null"}, "timeout": 60}
		r := e.OSBCall("POST", "/v1/sandboxes", testKey, body, nil)
		if c.allowed && r.Status != http.StatusAccepted {
			t.Errorf("%s: %d %s, want 202", c.uri, r.Status, r.Body)
		}
		if !c.allowed && (r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "not served here")) {
			t.Errorf("%s: %d %s, want 400 not served here", c.uri, r.Status, r.Body)
		}
	}
	for _, s := range rec.Specs() {
		if strings.Contains(s.Image, "evil") {
			t.Errorf("the provider was asked for %s", s.Image)
		}
	}
}
