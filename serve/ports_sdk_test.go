package serve

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/berth-sh/berth/internal/testing/testbin"
)

// selfDomain as a test's Options.Domain becomes "localhost:PORT", PORT
// being the test server's own: what getHost names is then this server.
const selfDomain = "localhost:self"

// TestSDKPorts: the official e2b SDK (2.51.0) reaches a port served
// inside a sandbox created with public traffic off, as its docs show:
// sandbox.getHost(port), then fetch (refused without the traffic token),
// then a WebSocket echoing 1,000 messages in order (refused without the
// token), over each backend.
func TestSDKPorts(t *testing.T) {
	node := nodeSDK(t)
	if _, err := os.Stat(filepath.Join(sdkDir, "node_modules", "ws", "package.json")); err != nil {
		t.Skipf("ws is not installed: run npm ci in serve/%s", sdkDir)
	}
	bin, err := testbin.Static("portserver", "github.com/berth-sh/berth/sandbox/sandboxtest/internal/portserver")
	if err != nil {
		t.Fatal(err)
	}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			e := be.newEnv(t, func(o *Options) { o.Domain = selfDomain })
			domain := strings.TrimPrefix(e.url, "http://127.0.0.1")
			out := e.runScript(node, sdkDir, "ports.mjs", "e2b", "", []string{
				"E2B_API_URL=" + e.url,
				"E2B_SANDBOX_URL=" + e.url,
				"E2B_API_KEY=" + testKey,
				"PORTSERVER=" + bin,
				// The fake backend's sandboxes share this host's network.
				"PORT=" + strconv.Itoa(freePort(t)),
				"WANT_DOMAIN=localhost" + domain,
			})
			e.checkScenario(out,
				"ok getHost names the port under the domain",
				"ok fetch with the traffic token",
				"ok fetch without the token is refused",
				"ok WebSocket echoes 1000 messages in order",
				"ok WebSocket without the token is refused",
			)
		})
	}
}
