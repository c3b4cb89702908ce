package serve

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/berth-sh/berth/serve/opensandbox"
)

// osbCall makes one OpenSandbox API request with key (as
// OPEN-SANDBOX-API-KEY, unless "") and extra headers.
func (e *testEnv) osbCall(method, path, key string, body any, hdr map[string]string) response {
	e.t.Helper()
	h := map[string]string{}
	for k, v := range hdr {
		h[k] = v
	}
	if key != "" {
		h[opensandbox.APIKeyHeader] = key
	}
	return e.call(method, path, "", body, h)
}

// osbCreate creates a sandbox through the OpenSandbox API and returns the
// 202 answer.
func (e *testEnv) osbCreate(key string, body any) opensandbox.Sandbox {
	e.t.Helper()
	r := e.osbCall("POST", "/v1/sandboxes", key, body, nil)
	if r.status != http.StatusAccepted {
		e.t.Fatalf("create: %d %s", r.status, r.body)
	}
	var sb opensandbox.Sandbox
	r.json(e.t, &sb)
	return sb
}

// osbEndpoint looks up port's endpoint and returns the URL path under the
// server (the endpoint is host/path) and the headers to send.
func (e *testEnv) osbEndpoint(key, id string, port int) (string, map[string]string) {
	e.t.Helper()
	r := e.osbCall("GET", "/v1/sandboxes/"+id+"/endpoints/"+itoa(port)+"?use_server_proxy=true", key, nil, nil)
	if r.status != http.StatusOK {
		e.t.Fatalf("endpoint %d: %d %s", port, r.status, r.body)
	}
	var ep opensandbox.Endpoint
	r.json(e.t, &ep)
	host := strings.TrimPrefix(e.url, "http://")
	path, ok := strings.CutPrefix(ep.Endpoint, host)
	if !ok {
		e.t.Fatalf("endpoint %q is not on the server %s", ep.Endpoint, host)
	}
	return path, ep.Headers
}

// events splits a command stream into its events.
func events(t testing.TB, body []byte) []opensandbox.StreamEvent {
	t.Helper()
	var out []opensandbox.StreamEvent
	for _, frame := range bytes.Split(body, []byte("\n\n")) {
		if len(bytes.TrimSpace(frame)) == 0 {
			continue
		}
		var ev opensandbox.StreamEvent
		if err := json.Unmarshal(frame, &ev); err != nil {
			t.Fatalf("frame %q is not one JSON event: %v", frame, err)
		}
		if ev.Timestamp == 0 {
			t.Fatalf("event without a timestamp: %q", frame)
		}
		out = append(out, ev)
	}
	return out
}

// runResult is what a client makes of a command stream.
type runResult struct {
	id, stdout, stderr string
	exit               *int
	complete           bool
	errValue           string
}

// digest reads a stream as the SDKs do: the init's id, output joined by
// newlines (Gym's provider joins the line events so), the exit code of
// the error event or 0 on completion.
func digest(t testing.TB, evs []opensandbox.StreamEvent) runResult {
	t.Helper()
	var res runResult
	var out, errs []string
	for _, ev := range evs {
		switch ev.Type {
		case opensandbox.EventInit:
			res.id = ev.Text
		case opensandbox.EventStdout:
			out = append(out, ev.Text)
		case opensandbox.EventStderr:
			errs = append(errs, ev.Text)
		case opensandbox.EventComplete:
			res.complete = true
			zero := 0
			res.exit = &zero
		case opensandbox.EventErr:
			res.errValue = ev.Error.EValue
			var n int
			if err := json.Unmarshal([]byte(ev.Error.EValue), &n); err == nil {
				res.exit = &n
			}
		}
	}
	res.stdout, res.stderr = strings.Join(out, "\n"), strings.Join(errs, "\n")
	return res
}

// execd posts to execd through the proxy path with the endpoint's headers
// and key.
func (e *testEnv) execd(method, base string, hdr map[string]string, key, sub string, body any) response {
	e.t.Helper()
	return e.osbCall(method, base+sub, key, body, hdr)
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// readAll drains r for the tests' raw calls.
func readAll(t testing.TB, r io.Reader) []byte {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
