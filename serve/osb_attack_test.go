package serve

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/berth-sh/berth/serve/opensandbox"
)

// osbImageBody is a create body naming the fake's template.
func osbImageBody(extra map[string]any) map[string]any {
	b := map[string]any{"image": map[string]any{"uri": "base"}, "entrypoint": []string{"tail", "-f", "/dev/null"}, "timeout": 600}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

// TestOpenSandboxKeysOwnTheirSandboxes: another API key cannot see, list,
// look up, renew, proxy to or delete a key's OpenSandbox sandbox; to it
// the sandbox does not exist. Checked by dropping the key's filter from
// owned(): GET and DELETE by the other key then answered 200 and 204.
func TestOpenSandboxKeysOwnTheirSandboxes(t *testing.T) {
	e := newEnv(t, nil, nil)
	sb := e.osbCreate(testKey, osbImageBody(nil))
	base, hdr := e.osbEndpoint(testKey, sb.ID, opensandbox.ExecdPort)
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
		r := e.osbCall(c.method, c.path, otherKey, body, nil)
		if r.status != http.StatusNotFound {
			t.Errorf("%s %s with another key: %d %s", c.method, c.path, r.status, r.body)
		}
	}
	var list opensandbox.ListResponse
	e.osbCall("GET", "/v1/sandboxes", otherKey, nil, nil).json(t, &list)
	if len(list.Items) != 0 || list.Pagination.TotalItems != 0 {
		t.Fatalf("another key lists %+v", list)
	}
	// Its own key still has it, running.
	if r := e.execd("GET", base, hdr, "", "/ping", nil); r.status != http.StatusOK {
		t.Fatalf("the owner's ping: %d %s", r.status, r.body)
	}
	e.osbCall("GET", "/v1/sandboxes", testKey, nil, nil).json(t, &list)
	if len(list.Items) != 1 || list.Items[0].ID != sb.ID {
		t.Fatalf("the owner lists %+v", list)
	}
	// Credentials: none, a wrong key, a wrong token.
	for name, h := range map[string]map[string]string{
		"no credentials": {},
		"a wrong key":    {opensandbox.APIKeyHeader: "test_key_cccccccccccccccccccccccc"},
		"a wrong token":  {opensandbox.AccessTokenHeader: strings.Repeat("0", 64)},
	} {
		if r := e.call("GET", base+"/ping", "", nil, h); r.status != http.StatusUnauthorized {
			t.Errorf("ping with %s: %d %s", name, r.status, r.body)
		}
	}
	if r := e.call("GET", "/v1/sandboxes/"+sb.ID, "", nil, nil); r.status != http.StatusUnauthorized || !strings.Contains(string(r.body), opensandbox.CodeMissingAPIKey) {
		t.Fatalf("get without a key: %d %s", r.status, r.body)
	}
	// The E2B API key header is not the OpenSandbox one.
	if r := e.call("GET", "/v1/sandboxes/"+sb.ID, testKey, nil, nil); r.status != http.StatusUnauthorized {
		t.Fatalf("get with X-API-KEY only: %d %s", r.status, r.body)
	}
	if r := e.osbCall("DELETE", "/v1/sandboxes/"+sb.ID, testKey, nil, nil); r.status != http.StatusNoContent {
		t.Fatalf("owner's delete: %d %s", r.status, r.body)
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
	attacker := e.osbCreate(otherKey, osbImageBody(nil))
	victim := e.osbCreate(testKey, osbImageBody(nil))
	abase, ahdr := e.osbEndpoint(otherKey, attacker.ID, opensandbox.ExecdPort)
	vbase, vhdr := e.osbEndpoint(testKey, victim.ID, opensandbox.ExecdPort)
	write := map[string]any{"command": "echo planted > /tmp/owned"}
	if r := e.execd("POST", vbase, vhdr, "", "/command", map[string]any{"command": "echo mine > /tmp/owned"}); r.status != http.StatusOK {
		t.Fatalf("victim's own command: %d %s", r.status, r.body)
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
		req, _ := http.NewRequest("POST", e.url+a.path, strings.NewReader(`{"command":"echo planted > /tmp/owned"}`))
		req.URL.Opaque = a.path // send the path as written, encodings and dots kept
		for k, v := range a.hdr {
			req.Header.Set(k, v)
		}
		res, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, res.Body)
		res.Body.Close()
		if res.StatusCode == http.StatusOK {
			t.Errorf("%s: 200 %s", a.name, body)
		}
		if loc := res.Header.Get("Location"); loc != "" {
			// A cleaned-path redirect must not lead into the victim either.
			if r := e.osbCall("POST", loc, "", write, a.hdr); r.status == http.StatusOK {
				t.Errorf("%s: the redirect to %s ran the command: %s", a.name, loc, r.body)
			}
		}
	}
	// The attacker's own token still works on its own path (the attacks
	// were refused for what they named, not for a broken token).
	if r := e.execd("POST", abase, ahdr, "", "/command", write); r.status != http.StatusOK {
		t.Fatalf("attacker's own command: %d %s", r.status, r.body)
	}
	r := e.execd("GET", vbase, vhdr, "", "/files/download?path=/tmp/owned", nil)
	if r.status != http.StatusOK || string(r.body) != "mine\n" {
		t.Fatalf("the victim's file: %d %q", r.status, r.body)
	}
}

// TestOpenSandboxBoundsAndPaths: bodies past the limits are 413 (create,
// command, upload), and file paths with ".." are refused.
func TestOpenSandboxBoundsAndPaths(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxBodyBytes = 4096; o.MaxUploadBytes = 1 << 20 }, nil)
	big := strings.Repeat("x", 8192)
	if r := e.osbCall("POST", "/v1/sandboxes", testKey, osbImageBody(map[string]any{"metadata": map[string]string{"k": big}}), nil); r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("large create: %d %s", r.status, r.body)
	}
	sb := e.osbCreate(testKey, osbImageBody(nil))
	base, hdr := e.osbEndpoint(testKey, sb.ID, opensandbox.ExecdPort)
	if r := e.execd("POST", base, hdr, "", "/command", map[string]any{"command": "true", "envs": map[string]string{"K": big}}); r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("large command: %d %s", r.status, r.body)
	}
	upload := func(path string, size int) response {
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
		return e.call("POST", base+"/files/upload", "", &buf, h)
	}
	if r := upload("/tmp/ok.bin", 1000); r.status != http.StatusOK {
		t.Fatalf("small upload: %d %s", r.status, r.body)
	}
	if r := upload("/tmp/big.bin", 2<<20); r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("2 MiB upload under a 1 MiB limit: %d %s", r.status, r.body)
	}
	if r := upload("/tmp/../../etc/x", 10); r.status != http.StatusBadRequest {
		t.Fatalf("upload to a dot-dot path: %d %s", r.status, r.body)
	}
	if r := e.execd("GET", base, hdr, "", "/files/download?path=../../etc/passwd", nil); r.status != http.StatusBadRequest {
		t.Fatalf("download of a dot-dot path: %d %s", r.status, r.body)
	}
	if r := e.execd("GET", base, hdr, "", "/files/download?path=/tmp/ok.bin", nil); r.status != http.StatusOK || len(r.body) != 1000 {
		t.Fatalf("download: %d %d bytes", r.status, len(r.body))
	}
	if r := e.execd("GET", base, hdr, "", "/files/download?path=/tmp/missing", nil); r.status != http.StatusNotFound || !strings.Contains(string(r.body), opensandbox.CodeFileNotFound) {
		t.Fatalf("download of a missing file: %d %s", r.status, r.body)
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
	p, rec := hostFake(t)
	e := newEnvOver(t, p, "host", func(o *Options) {
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
		r := e.osbCall("POST", "/v1/sandboxes", testKey, body, nil)
		if c.allowed && r.status != http.StatusAccepted {
			t.Errorf("%s: %d %s, want 202", c.uri, r.status, r.body)
		}
		if !c.allowed && (r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "not served here")) {
			t.Errorf("%s: %d %s, want 400 not served here", c.uri, r.status, r.body)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, s := range rec.specs {
		if strings.Contains(s.Image, "evil") {
			t.Errorf("the provider was asked for %s", s.Image)
		}
	}
}
