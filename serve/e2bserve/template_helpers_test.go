package e2bserve

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/sandbox"
)

// buildInfo is a build's status as the tests read it.
type buildInfo struct{ e2bapi.TemplateBuildInfo }

// requestTemplate is POST /v3/templates as key; it fails the test unless
// the answer is 202.
func (e *testEnv) requestTemplate(key, name string) (templateID, buildID string) {
	e.T.Helper()
	r := e.Call("POST", "/v3/templates", key, map[string]any{"name": name}, nil)
	if r.Status != http.StatusAccepted {
		e.T.Fatalf("POST /v3/templates %q: %d %s", name, r.Status, r.Body)
	}
	var v struct{ TemplateID, BuildID string }
	r.JSON(e.T, &v)
	return v.TemplateID, v.BuildID
}

// startTemplateBuild is POST /v2/templates/{tid}/builds/{bid}.
func (e *testEnv) startTemplateBuild(key, tid, bid string, body any) response {
	e.T.Helper()
	return e.Call("POST", "/v2/templates/"+tid+"/builds/"+bid, key, body, nil)
}

// buildTemplate requests and starts a build of name from steps over
// bashImage, failing the test unless the start is answered 202.
func (e *testEnv) buildTemplate(key, name string, steps ...e2bapi.TemplateStep) (tid, bid string) {
	e.T.Helper()
	tid, bid = e.requestTemplate(key, name)
	if r := e.startTemplateBuild(key, tid, bid, e2bapi.TemplateBuildStartV2{FromImage: bashImage, Steps: steps}); r.Status != http.StatusAccepted {
		e.T.Fatalf("start build of %s: %d %s", name, r.Status, r.Body)
	}
	return tid, bid
}

// waitBuild polls the status route as the SDK does (logsOffset moves by
// what each call returned; after the end, until a call returns nothing)
// and returns the last answer with every log entry seen.
func (e *testEnv) waitBuild(key, tid, bid string) buildInfo {
	e.T.Helper()
	var all []logEntry
	deadline := time.Now().Add(3 * time.Minute)
	for {
		r := e.Call("GET", "/templates/"+tid+"/builds/"+bid+"/status?logsOffset="+strconv.Itoa(len(all)), key, nil, nil)
		if r.Status != http.StatusOK {
			e.T.Fatalf("build status: %d %s", r.Status, r.Body)
		}
		var bi buildInfo
		r.JSON(e.T, &bi)
		all = append(all, bi.LogEntries...)
		if (bi.Status == statusReady || bi.Status == statusError) && len(bi.LogEntries) == 0 {
			bi.LogEntries = all
			return bi
		}
		if time.Now().After(deadline) {
			e.T.Fatalf("build %s still %s after 3 minutes", bid, bi.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logText joins the messages of entries, one a line.
func logText(es []logEntry) string {
	var b strings.Builder
	for _, e := range es {
		b.WriteString(e.Message + "\n")
	}
	return b.String()
}

// gzipped compresses b.
func gzipped(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// hashOf is a files hash for an archive: the SDK's is its own digest of
// the files; the server takes any 64 hex digits.
func hashOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// fileLink is GET /templates/{tid}/files/{hash}.
func (e *testEnv) fileLink(key, tid, hash string) (present bool, uploadURL string, r response) {
	e.T.Helper()
	r = e.Call("GET", "/templates/"+tid+"/files/"+hash, key, nil, nil)
	if r.Status != http.StatusCreated {
		return false, "", r
	}
	var v struct {
		Present bool   `json:"present"`
		URL     string `json:"url"`
	}
	r.JSON(e.T, &v)
	return v.Present, v.URL, r
}

// put PUTs body to an absolute URL without an API key, as the SDK does.
func (e *testEnv) put(u string, body []byte) response {
	e.T.Helper()
	req, err := http.NewRequest("PUT", u, bytes.NewReader(body))
	if err != nil {
		e.T.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.T.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{Status: res.StatusCode, Header: res.Header, Body: b}
}

// upload gets a link for archive and PUTs it; it returns the PUT's answer.
func (e *testEnv) upload(key, tid string, archive []byte) (string, response) {
	e.T.Helper()
	hash := hashOf(archive)
	present, u, r := e.fileLink(key, tid, hash)
	if r.Status != http.StatusCreated || present {
		e.T.Fatalf("file link: %d present=%v %s", r.Status, present, r.Body)
	}
	if !strings.HasPrefix(u, e.URL+"/templates/"+tid+"/files/"+hash+"?") {
		e.T.Fatalf("upload URL %q is not this server's", u)
	}
	return hash, e.put(u, archive)
}

// withQuery returns u with key set to v in its query.
func withQuery(t testing.TB, u, key, v string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := p.Query()
	q.Set(key, v)
	p.RawQuery = q.Encode()
	return p.String()
}

// shellIn runs script with sh in the sandbox through the server's data
// plane and returns its stdout.
func (e *testEnv) shellIn(sb e2bapi.Sandbox, script string) (string, error) {
	e.T.Helper()
	var out strings.Builder
	p, err := e.EnvdClient(sb).Exec(e.T.Context(), sandbox.Command{Args: []string{"/bin/sh", "-c", script}, Stdout: &out})
	if err != nil {
		return "", err
	}
	if code, err := p.Wait(e.T.Context()); err != nil || code != 0 {
		return out.String(), fmt.Errorf("exit %d: %v", code, err)
	}
	return out.String(), nil
}
