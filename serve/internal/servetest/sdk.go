package servetest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// testdata is a directory of serve/testdata, which holds the npm packages
// the SDK tests run (installed by .ci/run with npm ci), found from this
// file so that the tests of every package of serve reach it.
func testdata(sub string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", sub)
}

// The SDKs' directories.
var (
	// SDKDir holds the official e2b npm SDK at the versions whose wire
	// differs (package.json).
	SDKDir = testdata("sdk")
	// OSBSDKDir holds the official OpenSandbox JS SDK.
	OSBSDKDir = testdata("opensandbox")
)

// SDKs are the installed e2b SDK versions, by package name: 2.51.0 (POST
// /v2/sandboxes and /v2/.../connect), 2.14.1 (v1 routes; headers on every
// data-plane call) and 2.10.4 (/files and /health without the id header:
// routed by access token). SDKs before 2.7 cannot be pointed at a plain
// HTTP address (no E2B_SANDBOX_URL): they need https://49983-<id>.<domain>.
var SDKs = []string{"e2b", "e2b-old", "e2b-2.10"}

// NodeSDK returns node's path, or skips when node or the installed e2b
// SDKs are missing.
func NodeSDK(t testing.TB) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the SDK scenario needs Node.js >= 20.18")
	}
	for _, m := range SDKs {
		if _, err := os.Stat(filepath.Join(SDKDir, "node_modules", m, "package.json")); err != nil {
			t.Skip("the e2b SDK is not installed: run npm ci in serve/testdata/sdk")
		}
	}
	return node
}

// NodeOSB returns node's path, or skips when node or the OpenSandbox SDK
// is missing.
func NodeOSB(t testing.TB) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the OpenSandbox SDK scenario needs Node.js >= 20")
	}
	if _, err := os.Stat(filepath.Join(OSBSDKDir, "node_modules", "@alibaba-group", "opensandbox", "package.json")); err != nil {
		t.Skip("the OpenSandbox SDK is not installed: run npm ci in serve/testdata/opensandbox")
	}
	return node
}

// RunSDK runs the e2b SDK's scenario.mjs in mode with one SDK against e.
func (e *Env) RunSDK(node, sdk, mode string, extra ...string) string {
	e.T.Helper()
	return e.RunScenario(node, SDKDir, sdk, mode, append([]string{
		"SDK=" + sdk,
		"E2B_API_URL=" + e.URL,
		"E2B_SANDBOX_URL=" + e.URL,
		"E2B_DOMAIN=localhost",
		"E2B_API_KEY=" + TestKey,
	}, extra...))
}

// RunScenario runs dir/scenario.mjs in mode with env (and PATH and a HOME
// of its own), failing the test with its output when it fails.
func (e *Env) RunScenario(node, dir, name, mode string, env []string) string {
	e.T.Helper()
	return e.RunScript(node, dir, "scenario.mjs", name, mode, env)
}

// RunScript is RunScenario with another script of dir.
func (e *Env) RunScript(node, dir, script, name, mode string, env []string) string {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, mode)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + e.T.TempDir()}, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		e.T.Fatalf("%s scenario (%s): %v\n%s", name, mode, err, out)
	}
	return string(out)
}

// CheckScenario fails the test unless out has each line and PASS, and the
// server holds no sandbox after it.
func (e *Env) CheckScenario(out string, lines ...string) {
	e.T.Helper()
	for _, want := range append(lines, "PASS") {
		if !strings.Contains(out, want+"\n") {
			e.T.Fatalf("no %q in the scenario's output:\n%s", want, out)
		}
	}
	if n := e.C.Live(); n != 0 {
		e.T.Fatalf("%d sandboxes left after the scenario", n)
	}
}
