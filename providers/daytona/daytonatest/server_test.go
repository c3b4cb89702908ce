package daytonatest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/berth-sh/berth/providers/daytona/daytonatest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// api calls the server as a client would and decodes a JSON answer.
func api(t *testing.T, srv *daytonatest.Server, method, url, key string, body any, header http.Header) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func newServer(t *testing.T, o daytonatest.Options) *daytonatest.Server {
	t.Helper()
	o.Dir = t.TempDir()
	srv, err := daytonatest.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

func waitState(t *testing.T, srv *daytonatest.Server, id, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for srv.State(id) != want {
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s is %s, never %s", id, srv.State(id), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSessionLogIsMarkedLines: the fake writes a session log as Daytona's
// daemon does, quirks included: a marker per line, NUL bytes lost, a
// newline added to a last line that had none. These are what the driver's
// exec wrapper exists to undo.
func TestSessionLogIsMarkedLines(t *testing.T) {
	if why := daytonatest.Available(); why != "" {
		t.Skip(why)
	}
	srv := newServer(t, daytonatest.Options{})
	key := srv.APIKey()
	code, body := api(t, srv, "POST", srv.URL()+"/sandbox", key, map[string]any{"snapshot": "daytonaio/sandbox:latest"}, nil)
	if code != http.StatusOK {
		t.Fatalf("create: %d %s", code, body)
	}
	var sb struct{ ID, State string }
	json.Unmarshal(body, &sb)
	waitState(t, srv, sb.ID, "started")
	code, body = api(t, srv, "GET", srv.URL()+"/sandbox/"+sb.ID+"/toolbox-proxy-url", key, nil, nil)
	var tb struct{ URL string }
	if json.Unmarshal(body, &tb); code != http.StatusOK || tb.URL == "" {
		t.Fatalf("toolbox url: %d %s", code, body)
	}
	base := tb.URL + "/" + sb.ID
	if code, body := api(t, srv, "POST", base+"/process/session", key, map[string]string{"sessionId": "s1"}, nil); code != http.StatusCreated {
		t.Fatalf("session: %d %s", code, body)
	}
	code, body = api(t, srv, "POST", base+"/process/session/s1/exec", key, map[string]any{"command": `printf 'a\000b'; printf 'err' >&2; exit 3`}, nil)
	var res struct {
		CmdID    string `json:"cmdId"`
		ExitCode *int   `json:"exitCode"`
		Output   string `json:"output"`
	}
	if json.Unmarshal(body, &res); code != http.StatusOK || res.ExitCode == nil || *res.ExitCode != 3 {
		t.Fatalf("sync exec: %d %s", code, body)
	}
	// A client that asks for the split gets the daemon's JSON: the marked
	// log, and each stream apart.
	_, body = api(t, srv, "GET", base+"/process/session/s1/command/"+res.CmdID+"/logs", key, nil, http.Header{"X-Daytona-Split-Output": {"true"}})
	var logs struct{ Output, Stdout, Stderr string }
	if err := json.Unmarshal(body, &logs); err != nil || logs.Stdout != "ab\n" || logs.Stderr != "err\n" {
		t.Errorf("split logs %s (%v): want stdout ab, stderr err", body, err)
	}
	raw := []byte(logs.Output)
	if !bytes.Contains(raw, []byte("\x01\x01\x01ab\n")) || !bytes.Contains(raw, []byte("\x02\x02\x02err\n")) || len(raw) != len("\x01\x01\x01ab\n\x02\x02\x02err\n") {
		t.Errorf("raw log %q: want the lines ab and err, marked, NUL dropped, newlines added", raw)
	}
	_, merged := api(t, srv, "GET", base+"/process/session/s1/command/"+res.CmdID+"/logs", key, nil, nil)
	if string(merged) != "ab\nerr\n" && string(merged) != "err\nab\n" {
		t.Errorf("merged log %q", merged)
	}
	if code, _ := api(t, srv, "POST", base+"/process/session/s1/command/"+res.CmdID+"/input", key, map[string]string{"data": "x"}, nil); code != http.StatusGone {
		t.Errorf("input to an ended command: %d, want 410", code)
	}
	if code, _ := api(t, srv, "DELETE", base+"/process/session/s1", key, nil, nil); code != http.StatusNoContent {
		t.Errorf("delete session: %d", code)
	}
	if code, _ := api(t, srv, "GET", base+"/process/session/s1/command/"+res.CmdID, key, nil, nil); code != http.StatusNotFound {
		t.Errorf("command of a deleted session: %d, want 404", code)
	}
}

// TestStatesAndRefusals: the build path's states, Daytona's quota and
// per-sandbox texts, auth, and injected 429s with their headers.
func TestStatesAndRefusals(t *testing.T) {
	srv := newServer(t, daytonatest.Options{DiskQuotaGB: 4, StepDelay: 20 * time.Millisecond})
	key := srv.APIKey()
	if code, _ := api(t, srv, "GET", srv.URL()+"/sandbox", "wrong", nil, nil); code != http.StatusUnauthorized {
		t.Errorf("wrong key: %d, want 401", code)
	}
	code, body := api(t, srv, "POST", srv.URL()+"/sandbox", key, map[string]any{"buildInfo": map[string]string{"dockerfileContent": "FROM alpine:3"}}, nil)
	var sb struct{ ID, State string }
	if json.Unmarshal(body, &sb); code != http.StatusOK || sb.State != "pending_build" {
		t.Fatalf("create from an image: %d %s, want pending_build", code, body)
	}
	waitState(t, srv, sb.ID, "started")
	if h := srv.History(sb.ID); !slices.Equal(h, []string{"pending_build", "building_snapshot", "creating", "started"}) {
		t.Errorf("states of a build: %v", h)
	}

	code, body = api(t, srv, "POST", srv.URL()+"/sandbox", key, map[string]any{"disk": 2}, nil)
	if code != http.StatusBadRequest || !strings.Contains(string(body), "Total disk limit exceeded. Maximum allowed: 4GiB.") {
		t.Errorf("create past the disk quota: %d %s", code, body)
	}
	code, body = api(t, srv, "POST", srv.URL()+"/sandbox", key, map[string]any{"disk": 90}, nil)
	if code != http.StatusBadRequest || !strings.Contains(string(body), "Disk request 90GB exceeds maximum allowed per sandbox (10GB)") {
		t.Errorf("create above the per-sandbox disk: %d %s", code, body)
	}

	srv.FailBuilds(1, "step 1\nERROR: no such image\n")
	code, body = api(t, srv, "POST", srv.URL()+"/sandbox", key, map[string]any{"disk": 1, "buildInfo": map[string]string{"dockerfileContent": "FROM nosuch"}}, nil)
	if code != http.StatusOK && code != http.StatusCreated {
		t.Fatalf("create with a failing build: %d %s", code, body)
	}
	json.Unmarshal(body, &sb)
	waitState(t, srv, sb.ID, "build_failed")
	if _, logs := api(t, srv, "GET", srv.URL()+"/sandbox/"+sb.ID+"/build-logs", key, nil, nil); !strings.Contains(string(logs), "ERROR: no such image") {
		t.Errorf("build log %q", logs)
	}

	srv.RateLimit("GET", "/api/sandbox", 1, "authenticated", 7)
	req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL()+"/sandbox", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After-authenticated") != "7" {
		t.Errorf("rate limited: %d %v", resp.StatusCode, resp.Header)
	}
}
