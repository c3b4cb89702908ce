package e2bserve

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/e2bapi"
)

// A sandbox's own ports are served, not only envd's: by Host
// "<port>-<id>.<domain>" and by the E2b-Sandbox-Id and E2b-Sandbox-Port
// headers; a port nobody listens on answers E2B's 502 at once; a port
// that is not a number is 400.
func TestPortsRouted(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			e := be.newEnv(t, nil)
			sb := e.Create(testKey, map[string]any{"templateID": "base", "timeout": 120})
			if sb.TrafficAccessToken != nil {
				t.Fatalf("a sandbox with public traffic has a traffic token")
			}
			port, closed := freePort(t), freePort(t)
			mark := "served-" + sb.SandboxID
			e.Httpd(sb.SandboxID, port, mark)
			byHost := e.Call("GET", "/", "", nil, map[string]string{"Host": fmt.Sprintf("%d-%s.localhost", port, sb.SandboxID)})
			if byHost.Status != 200 || strings.TrimSpace(string(byHost.Body)) != mark {
				t.Fatalf("by host: %d %q", byHost.Status, byHost.Body)
			}
			byHeader := e.Call("GET", "/index.html", "", nil, map[string]string{e2bapi.SandboxIDHeader: sb.SandboxID, e2bapi.SandboxPortHeader: strconv.Itoa(port)})
			if byHeader.Status != 200 || strings.TrimSpace(string(byHeader.Body)) != mark {
				t.Fatalf("by headers: %d %q", byHeader.Status, byHeader.Body)
			}
			start := time.Now()
			r := e.Call("GET", "/", "", nil, map[string]string{"Host": fmt.Sprintf("%d-%s.localhost:1234", closed, sb.SandboxID)})
			var pe struct {
				SandboxID string `json:"sandboxId"`
				Message   string `json:"message"`
				Port      int    `json:"port"`
				Code      int    `json:"code"`
			}
			r.JSON(t, &pe)
			if r.Status != http.StatusBadGateway || pe.Code != 502 || pe.Port != closed || pe.SandboxID != sb.SandboxID || pe.Message != "The sandbox is running but port is not open" {
				t.Fatalf("a closed port: %d %s", r.Status, r.Body)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Fatalf("a closed port took %v to answer", d)
			}
			for _, bad := range []string{"0", "65536", "08000", "x"} {
				if r := e.Call("GET", "/", "", nil, map[string]string{e2bapi.SandboxIDHeader: sb.SandboxID, e2bapi.SandboxPortHeader: bad}); r.Status != http.StatusBadRequest {
					t.Errorf("port %q: %d %s, want 400", bad, r.Status, r.Body)
				}
			}
		})
	}
}

// A sandbox created with network.allowPublicTraffic false answers calls
// to its ports only with its traffic access token, which create returns
// and nothing else does; the token is not passed on to the sandbox.
func TestPortsTrafficToken(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			e := be.newEnv(t, nil)
			sb := e.Create(testKey, map[string]any{"templateID": "base", "timeout": 120, "network": map[string]any{"allowPublicTraffic": false}})
			if sb.TrafficAccessToken == nil || len(*sb.TrafficAccessToken) < 32 || *sb.TrafficAccessToken == sb.EnvdAccessToken {
				t.Fatalf("create answered traffic token %v", sb.TrafficAccessToken)
			}
			port := freePort(t)
			e.Httpd(sb.SandboxID, port, "private")
			host := fmt.Sprintf("%d-%s.localhost", port, sb.SandboxID)
			for name, hdr := range map[string]map[string]string{
				"no token":         {"Host": host},
				"another's token":  {"Host": host, "E2b-Traffic-Access-Token": strings.Repeat("a", 64)},
				"the envd token":   {"Host": host, "E2b-Traffic-Access-Token": sb.EnvdAccessToken},
				"token as api key": {"Host": host, "X-API-KEY": *sb.TrafficAccessToken},
			} {
				r := e.Call("GET", "/", "", nil, hdr)
				if r.Status != http.StatusForbidden || strings.Contains(string(r.Body), "private") || !strings.Contains(string(r.Body), "e2b-traffic-access-token") {
					t.Errorf("%s: %d %q, want 403 naming the header", name, r.Status, r.Body)
				}
			}
			r := e.Call("GET", "/", "", nil, map[string]string{"Host": host, "e2b-traffic-access-token": *sb.TrafficAccessToken})
			if r.Status != 200 || strings.TrimSpace(string(r.Body)) != "private" {
				t.Fatalf("with the token: %d %q", r.Status, r.Body)
			}
			// connect answers the token too; list and get do not carry it.
			var c e2bapi.Sandbox
			e.Call("POST", "/sandboxes/"+sb.SandboxID+"/connect", testKey, map[string]any{"timeout": 60}, nil).JSON(t, &c)
			if c.TrafficAccessToken == nil || *c.TrafficAccessToken != *sb.TrafficAccessToken {
				t.Fatalf("connect answered traffic token %v", c.TrafficAccessToken)
			}
			if g := e.Call("GET", "/sandboxes/"+sb.SandboxID, testKey, nil, nil); strings.Contains(string(g.Body), *sb.TrafficAccessToken) {
				t.Fatalf("get shows the traffic token")
			}
		})
	}
}

// One sandbox's port is never reached through another's ID: on the
// local backend every sandbox has its own network, and a port of B that
// nobody serves is 502 even while A serves it.
func TestPortsOtherSandbox(t *testing.T) {
	e := newLocalEnv(t, nil)
	a := e.Create(testKey, map[string]any{"templateID": "base", "timeout": 120})
	b := e.Create(testKey, map[string]any{"templateID": "base", "timeout": 120})
	e.Httpd(a.SandboxID, 8000, "only-a")
	if r := e.Call("GET", "/", "", nil, map[string]string{"Host": "8000-" + a.SandboxID + ".localhost"}); r.Status != 200 {
		t.Fatalf("control: A's port: %d %s", r.Status, r.Body)
	}
	r := e.Call("GET", "/", "", nil, map[string]string{"Host": "8000-" + b.SandboxID + ".localhost"})
	if r.Status != http.StatusBadGateway || strings.Contains(string(r.Body), "only-a") {
		t.Fatalf("B's port 8000 while A serves it: %d %q", r.Status, r.Body)
	}
}
