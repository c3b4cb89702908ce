package dataplane

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/sandbox"
)

// agentControlPath is the in-sandbox agent's deadline endpoint, served on
// the same socket as envd (the top-level agent package's ControlPath). A
// PUT there with an empty deadline would lift the sandbox's own deadline.
const agentControlPath = "/berth.agent/deadline"

// fakeAgent is what the proxy forwards to, shaped like the agent's socket:
// a ServeMux with the control endpoint and envd behind "/". It records
// every path that reaches it.
type fakeAgent struct {
	controlHits atomic.Int32
	mu          sync.Mutex
	paths       []string
}

func (a *fakeAgent) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(agentControlPath, func(w http.ResponseWriter, r *http.Request) {
		a.controlHits.Add(1)
		io.WriteString(w, `{"deadline":""}`)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.paths = append(a.paths, r.URL.EscapedPath())
		a.mu.Unlock()
		io.WriteString(w, "envd")
	})
	return mux
}

// isEnvdPath reports a path that is one of envd's routes, spelt plainly.
func isEnvdPath(p string) bool {
	if p == "/files" || p == "/health" {
		return true
	}
	for _, svc := range []string{"/process.Process/", "/filesystem.Filesystem/"} {
		if m, ok := strings.CutPrefix(p, svc); ok && m != "" && !strings.ContainsAny(m, "/.%") {
			return true
		}
	}
	return false
}

// rawRequest sends a request line exactly as written (no client library
// normalises it) and returns the status code.
func rawRequest(t *testing.T, addr, method, target string) int {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := `{"deadline":""}`
	fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: 49983-sb.localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		method, target, len(body), body)
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0 // the server hung up on a request line it would not parse
	}
	res.Body.Close()
	return res.StatusCode
}

// TestProxyRefusesTheAgentsControlEndpoints is the attack: a key holder
// with a sandbox's access token tries every spelling of the agent's
// deadline route through the data-plane proxy (percent-encoding, doubled
// slashes, dot segments, case, trailing slashes, a route as a prefix) to
// lift the deadline. None may reach the agent; envd's routes still do.
// On 6f9918d the proxy forwarded any path, and the agent's mux served the
// control endpoint: checked there, this test failed.
func TestProxyRefusesTheAgentsControlEndpoints(t *testing.T) {
	agent := &fakeAgent{}
	upstream := httptest.NewServer(agent.handler())
	defer upstream.Close()
	px, err := NewProxy(sandbox.EnvdEndpoint{BaseURL: upstream.URL}, ProxyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(px)
	defer front.Close()
	addr := strings.TrimPrefix(front.URL, "http://")

	for _, target := range []string{
		agentControlPath,
		"//berth.agent/deadline",
		"/berth.agent//deadline",
		"/./berth.agent/deadline",
		"/berth.agent/./deadline",
		"/berth.agent/deadline/",
		"/berth.agent/deadline/.",
		"/x/../berth.agent/deadline",
		"/files/../berth.agent/deadline",
		"/health/../berth.agent/deadline",
		"/process.Process/../../berth.agent/deadline",
		"/files/%2e%2e/berth.agent/deadline",
		"/files%2f..%2fberth.agent%2fdeadline",
		"/berth%2Eagent/deadline",
		"/berth%2eagent%2fdeadline",
		"/%62erth.agent/deadline",
		"/berth.agent%2Fdeadline",
		"/BERTH.AGENT/DEADLINE",
		"/Berth.Agent/Deadline",
		"http://49983-sb.localhost/berth.agent/deadline",
		"http://49983-sb.localhost//berth.agent/deadline",
		"/berth.agent/deadline?x=/files",
		"/berth.agent/deadline#/files",
		"/berth.agent/deadline;/files",
	} {
		for _, method := range []string{"PUT", "GET", "POST"} {
			if st := rawRequest(t, addr, method, target); st == http.StatusOK {
				t.Errorf("%s %s: answered 200 through the proxy", method, target)
			}
		}
	}
	if n := agent.controlHits.Load(); n != 0 {
		t.Errorf("the agent's control endpoint was reached %d times through the proxy", n)
	}
	agent.mu.Lock()
	for _, p := range agent.paths {
		if !isEnvdPath(p) {
			t.Errorf("a path that is no envd route reached the sandbox: %q", p)
		}
	}
	agent.mu.Unlock()
	// envd's own routes still go through.
	for _, target := range []string{"/health", "/files?path=/tmp/x", "/process.Process/List"} {
		if st := rawRequest(t, addr, "GET", target); st != http.StatusOK {
			t.Errorf("GET %s: %d, want it forwarded", target, st)
		}
	}
}

// TestProxyUploadLimitCountsDecompressedBytes is the attack: a gzip body
// of a few kilobytes that unpacks to 16 MiB, sent through the proxy whose
// upload limit is 1 MiB, to a sandbox envd whose own limit is far higher.
// The upload is refused and the sandbox holds at most the limit. On
// 6f9918d the proxy bounded only the compressed bytes: checked there, the
// whole 64 MiB was written and this test failed.
func TestProxyUploadLimitCountsDecompressedBytes(t *testing.T) {
	dir := t.TempDir()
	srv, err := envd.NewServer(envd.ServerOptions{DefaultDir: dir, MaxUploadBytes: 1 << 40, Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	upstream := httptest.NewServer(srv)
	defer upstream.Close()
	const limit = 1 << 20
	px, err := NewProxy(sandbox.EnvdEndpoint{BaseURL: upstream.URL}, ProxyOptions{MaxUploadBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(px)
	defer front.Close()

	var bomb bytes.Buffer
	zw := gzip.NewWriter(&bomb)
	zeros := make([]byte, 1<<20)
	for range 16 {
		zw.Write(zeros)
	}
	zw.Close()
	if bomb.Len() > limit/8 {
		t.Fatalf("the bomb is %d bytes compressed; it should be far under the limit", bomb.Len())
	}
	dest := filepath.Join(dir, "bomb")
	req, _ := http.NewRequest(http.MethodPost, front.URL+"/files?path="+dest, bytes.NewReader(bomb.Bytes()))
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Content-Encoding", "gzip")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("upload of a gzip bomb: %d, want 413", res.StatusCode)
	}
	if fi, err := os.Stat(dest); err == nil && fi.Size() > limit {
		t.Errorf("the sandbox holds %d bytes of the bomb, over the %d-byte limit", fi.Size(), limit)
	}

	// A gzip body within the limit arrives whole and plain.
	var small bytes.Buffer
	zw = gzip.NewWriter(&small)
	zw.Write([]byte("hello, gzip"))
	zw.Close()
	ok := filepath.Join(dir, "ok")
	req, _ = http.NewRequest(http.MethodPost, front.URL+"/files?path="+ok, &small)
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Content-Encoding", "gzip")
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if b, err := os.ReadFile(ok); res.StatusCode != http.StatusOK || string(b) != "hello, gzip" {
		t.Errorf("a small gzip upload: %d, %q, %v", res.StatusCode, b, err)
	}
}
