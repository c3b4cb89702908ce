package servetest

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/berth-sh/berth/serve/opensandbox"
)

// OSBCall makes one OpenSandbox API request with key (as
// OPEN-SANDBOX-API-KEY, unless "") and extra headers.
func (e *Env) OSBCall(method, path, key string, body any, hdr map[string]string) Response {
	e.T.Helper()
	h := maps.Clone(hdr)
	if h == nil {
		h = map[string]string{}
	}
	if key != "" {
		h[opensandbox.APIKeyHeader] = key
	}
	return e.Call(method, path, "", body, h)
}

// OSBImageBody is a create body naming the "base" template, with extra.
func OSBImageBody(extra map[string]any) map[string]any {
	b := map[string]any{"image": map[string]any{"uri": "base"}, "entrypoint": []string{"tail", "-f", "/dev/null"}, "timeout": 600}
	maps.Copy(b, extra)
	return b
}

// OSBCreate creates a sandbox through the OpenSandbox API and returns the
// 202 answer.
func (e *Env) OSBCreate(key string, body any) opensandbox.Sandbox {
	e.T.Helper()
	r := e.OSBCall("POST", "/v1/sandboxes", key, body, nil)
	if r.Status != http.StatusAccepted {
		e.T.Fatalf("create: %d %s", r.Status, r.Body)
	}
	var sb opensandbox.Sandbox
	r.JSON(e.T, &sb)
	return sb
}

// OSBEndpoint looks up port's endpoint and returns the URL path under the
// server (the endpoint is host/path) and the headers to send.
func (e *Env) OSBEndpoint(key, id string, port int) (string, map[string]string) {
	e.T.Helper()
	r := e.OSBCall("GET", "/v1/sandboxes/"+id+"/endpoints/"+strconv.Itoa(port)+"?use_server_proxy=true", key, nil, nil)
	if r.Status != http.StatusOK {
		e.T.Fatalf("endpoint %d: %d %s", port, r.Status, r.Body)
	}
	var ep opensandbox.Endpoint
	r.JSON(e.T, &ep)
	host := strings.TrimPrefix(e.URL, "http://")
	path, ok := strings.CutPrefix(ep.Endpoint, host)
	if !ok {
		e.T.Fatalf("endpoint %q is not on the server %s", ep.Endpoint, host)
	}
	return path, ep.Headers
}

// Execd calls execd through the proxy path with the endpoint's headers
// and key.
func (e *Env) Execd(method, base string, hdr map[string]string, key, sub string, body any) Response {
	e.T.Helper()
	return e.OSBCall(method, base+sub, key, body, hdr)
}

// Events splits a command stream into its events.
func Events(t testing.TB, body []byte) []opensandbox.StreamEvent {
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

// RunResult is what a client makes of a command stream.
type RunResult struct {
	ID, Stdout, Stderr string
	Exit               *int
	Complete           bool
	ErrValue           string
}

// Digest reads a stream as the SDKs do: the init's id, output joined by
// newlines (Gym's provider joins the line events so), the exit code of
// the error event or 0 on completion.
func Digest(t testing.TB, evs []opensandbox.StreamEvent) RunResult {
	t.Helper()
	var res RunResult
	var out, errs []string
	for _, ev := range evs {
		switch ev.Type {
		case opensandbox.EventInit:
			res.ID = ev.Text
		case opensandbox.EventStdout:
			out = append(out, ev.Text)
		case opensandbox.EventStderr:
			errs = append(errs, ev.Text)
		case opensandbox.EventComplete:
			res.Complete = true
			zero := 0
			res.Exit = &zero
		case opensandbox.EventErr:
			res.ErrValue = ev.Error.EValue
			var n int
			if err := json.Unmarshal([]byte(ev.Error.EValue), &n); err == nil {
				res.Exit = &n
			}
		}
	}
	res.Stdout, res.Stderr = strings.Join(out, "\n"), strings.Join(errs, "\n")
	return res
}
