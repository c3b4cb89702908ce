package session

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/berth-sh/berth/session/engine"
	"github.com/berth-sh/berth/session/testengine"
)

// rawGet sends a GET with target exactly as given (no client cleans or
// re-escapes it) and returns the status.
func rawGet(t *testing.T, base, target string) int {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", target)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestAttackRelayPathLeavesPrefix: the engine (the test engine, which
// keeps every request target it gets) is at http://127.0.0.1:PORT/prefix/
// and the session server relays ANY /sessions/{id}/{path} to it. On 5553f78 "%2e%2e/admin" reached the
// engine as /prefix/../admin (and "..%2fadmin" the same), which the
// engine's server cleans to /admin, outside the prefix. Now every path
// that decodes to a dot segment, an empty segment, a slash or a backslash
// is answered 400 and never reaches the engine; a plain path does, under
// the prefix.
func TestAttackRelayPathLeavesPrefix(t *testing.T) {
	e := newEnv(t, agentScript(func(testengine.Call) string { return "x" }), testengine.Options{}, nil)
	var err error
	if e.srv.opts.Engine, err = engine.New(e.engURL+"/prefix/", engine.SGLang, engine.Options{}); err != nil {
		t.Fatal(err)
	}
	id := e.create()
	for _, p := range []string{"%2e%2e/admin", "..%2fadmin", "%2E%2E%5Cadmin", "v1/%2e%2e/%2e%2e/admin", ".%2e/admin", "v1/..%5C..%5Cadmin", "%2e%2e;/admin", "v1%2F..%2F..%2Fadmin"} {
		if status := rawGet(t, e.url, "/sessions/"+id+"/"+p); status != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", p, status)
		}
	}
	// The test engine answers 404 for a path other than chat completions;
	// the relay passes that through.
	if status := rawGet(t, e.url, "/sessions/"+id+"/v1/models"); status != http.StatusNotFound {
		t.Errorf("v1/models: %d", status)
	}
	if got, want := e.eng.Targets(), []string{"/prefix/v1/models"}; !slices.Equal(got, want) {
		t.Errorf("the engine got %q, want %q", got, want)
	}
}
