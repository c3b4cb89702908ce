package e2bserve

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/berth-sh/berth/internal/testing/testbin"
	"github.com/berth-sh/berth/serve/internal/core"
	"github.com/berth-sh/berth/serve/internal/servetest"
)

// TestSDKPorts: the official e2b SDK (2.51.0) reaches a port served
// inside a sandbox created with public traffic off, as its docs show:
// sandbox.getHost(port), then fetch (refused without the traffic token),
// then a WebSocket echoing 1,000 messages in order (refused without the
// token), over each backend.
func TestSDKPorts(t *testing.T) {
	node := servetest.NodeSDK(t)
	if _, err := os.Stat(filepath.Join(servetest.SDKDir, "node_modules", "ws", "package.json")); err != nil {
		t.Skipf("ws is not installed: run npm ci in serve/%s", servetest.SDKDir)
	}
	bin, err := testbin.Static("portserver", "github.com/berth-sh/berth/sandbox/sandboxtest/internal/portserver")
	if err != nil {
		t.Fatal(err)
	}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			e := be.newEnv(t, func(o *core.Options) { o.Domain = servetest.SelfDomain })
			domain := strings.TrimPrefix(e.URL, "http://127.0.0.1")
			out := e.RunScript(node, servetest.SDKDir, "ports.mjs", "e2b", "", []string{
				"E2B_API_URL=" + e.URL,
				"E2B_SANDBOX_URL=" + e.URL,
				"E2B_API_KEY=" + testKey,
				"PORTSERVER=" + bin,
				// The fake backend's sandboxes share this host's network.
				"PORT=" + strconv.Itoa(freePort(t)),
				"WANT_DOMAIN=localhost" + domain,
			})
			e.CheckScenario(out,
				"ok getHost names the port under the domain",
				"ok fetch with the traffic token",
				"ok fetch without the token is refused",
				"ok WebSocket echoes 1000 messages in order",
				"ok WebSocket without the token is refused",
			)
		})
	}
}
