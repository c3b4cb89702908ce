package daytonatest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/providers/daytona/daytonatest"
)

// runNode runs a script of the SDK directory with the SDK pointed at srv.
func runNode(t *testing.T, node, dir string, srv *daytonatest.Server, script string, extra ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = dir
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + t.TempDir(),
		"DAYTONA_API_URL=" + srv.URL(),
		"DAYTONA_API_KEY=" + srv.APIKey(),
	}, extra...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return string(out)
}

// TestSDKScenario runs issue 16's scenario with the official Daytona SDK
// against the fake: create from an image with labels, resources and
// auto-stop; exec; an async session command and its logs; files; a
// preview link; stop, start, list by labels, delete; and the SDK's own
// error types for a 429 with Retry-After-<throttler> and a quota refusal.
func TestSDKScenario(t *testing.T) {
	node, dir := daytonatest.SDK(t)
	if why := daytonatest.Available(); why != "" {
		t.Skip(why)
	}
	schema := daytonatest.LoadSchema(t)
	srv := newServer(t, daytonatest.Options{DiskQuotaGB: 8, StepDelay: 20 * time.Millisecond, Record: true})
	srv.RateLimit("POST", "/api/sandbox", 1, "sandbox-create", 1)
	out := runNode(t, node, dir, srv, "scenario.mjs", "SCENARIO_FAULTS=1")
	for _, want := range []string{
		"ok 429 is DaytonaRateLimitError with retry-after-sandbox-create: 1",
		"ok create from an image with labels, resources and auto-stop",
		"ok process exec with exit code and output",
		"ok session command run async with its logs",
		"ok file upload, download, list and delete",
		"ok preview link for a port",
		"ok stop, start, delete and list by labels",
		"ok quota error is DaytonaBadRequestError",
		"PASS",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Fatalf("no %q in the scenario's output:\n%s", want, out)
		}
	}
	// The SDK went through the routes the scenario is about, not others
	// that happened to work.
	used := map[string]bool{}
	for _, r := range srv.Requests() {
		used[r.Method+" "+routeOf(r.Path)] = true
	}
	for _, want := range []string{
		"POST /api/sandbox", "GET /api/sandbox", "POST /toolbox/*/files/bulk-upload", "POST /toolbox/*/files/bulk-download",
		"GET /toolbox/*/process/session/*/command/*/logs", "GET /api/sandbox/*/ports/*/preview-url",
		"GET /api/sandbox/*/ports/*/signed-preview-url", "GET /preview/*", "GET /signed/*",
		"POST /api/sandbox/*/stop", "POST /api/sandbox/*/start", "DELETE /api/sandbox/*",
	} {
		if !used[want] {
			t.Errorf("the SDK did not call %s; it called %v", want, used)
		}
	}
	waitGone(t, srv)
	// What the fake answered the SDK is what the SDK's models say.
	for _, e := range srv.Exchanges() {
		for _, err := range schema.Check(e) {
			t.Error(err)
		}
	}
}

// routeOf replaces the IDs and names in a fake's path with "*".
func routeOf(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		prev := ""
		if i > 0 {
			prev = parts[i-1]
		}
		switch prev {
		case "sandbox", "toolbox", "session", "command", "ports", "preview", "signed":
			if s != "" {
				parts[i] = "*"
			}
		}
	}
	return strings.Join(parts, "/")
}

// waitGone waits for every sandbox the scenario made to be destroyed.
func waitGone(t *testing.T, srv *daytonatest.Server) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(srv.Live()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("sandboxes left after the scenario: %v", srv.Live())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
