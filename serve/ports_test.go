package serve

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/sandbox"
)

// httpd starts busybox httpd on port in the sandbox, serving mark at /,
// in the foreground of a command that is not waited for (the fake
// backend kills what a finished command left), and waits until it
// answers inside.
func (e *testEnv) httpd(id string, port int, mark string) {
	e.t.Helper()
	rec := e.s.st.get(id)
	if rec == nil {
		e.t.Fatalf("no sandbox %s", id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := "/tmp/www-" + strconv.Itoa(port)
	sh := func(script string) {
		e.t.Helper()
		res, err := rec.sb.Run(ctx, sandbox.Command{Args: []string{"sh", "-c", script}})
		if err != nil || res.ExitCode != 0 {
			e.t.Fatalf("%s: %v exit %d %s", script, err, res.ExitCode, res.Stderr)
		}
	}
	sh(fmt.Sprintf("mkdir -p %[1]s && echo %[2]s > %[1]s/index.html", dir, mark))
	proc, err := rec.sb.Exec(context.Background(), sandbox.Command{Args: []string{"busybox", "httpd", "-f", "-p", strconv.Itoa(port), "-h", dir}})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = proc.Signal(context.Background(), sandbox.SIGKILL) })
	sh(fmt.Sprintf("for i in $(busybox seq 600); do busybox wget -q -O - http://127.0.0.1:%d/ >/dev/null 2>&1 && exit 0; sleep 0.1; done; exit 1", port))
}

// freePort is a port free on the host now: the fake backend's sandboxes
// share its network.
func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// A sandbox's own ports are served, not only envd's: by Host
// "<port>-<id>.<domain>" and by the E2b-Sandbox-Id and E2b-Sandbox-Port
// headers; a port nobody listens on answers E2B's 502 at once; a port
// that is not a number is 400.
func TestPortsRouted(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			e := be.newEnv(t, nil)
			sb := e.create(testKey, map[string]any{"templateID": "base", "timeout": 120})
			if sb.TrafficAccessToken != nil {
				t.Fatalf("a sandbox with public traffic has a traffic token")
			}
			port, closed := freePort(t), freePort(t)
			mark := "served-" + sb.SandboxID
			e.httpd(sb.SandboxID, port, mark)
			byHost := e.call("GET", "/", "", nil, map[string]string{"Host": fmt.Sprintf("%d-%s.localhost", port, sb.SandboxID)})
			if byHost.status != 200 || strings.TrimSpace(string(byHost.body)) != mark {
				t.Fatalf("by host: %d %q", byHost.status, byHost.body)
			}
			byHeader := e.call("GET", "/index.html", "", nil, map[string]string{e2bapi.SandboxIDHeader: sb.SandboxID, e2bapi.SandboxPortHeader: strconv.Itoa(port)})
			if byHeader.status != 200 || strings.TrimSpace(string(byHeader.body)) != mark {
				t.Fatalf("by headers: %d %q", byHeader.status, byHeader.body)
			}
			start := time.Now()
			r := e.call("GET", "/", "", nil, map[string]string{"Host": fmt.Sprintf("%d-%s.localhost:1234", closed, sb.SandboxID)})
			var pe struct {
				SandboxID string `json:"sandboxId"`
				Message   string `json:"message"`
				Port      int    `json:"port"`
				Code      int    `json:"code"`
			}
			r.json(t, &pe)
			if r.status != http.StatusBadGateway || pe.Code != 502 || pe.Port != closed || pe.SandboxID != sb.SandboxID || pe.Message != "The sandbox is running but port is not open" {
				t.Fatalf("a closed port: %d %s", r.status, r.body)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Fatalf("a closed port took %v to answer", d)
			}
			for _, bad := range []string{"0", "65536", "08000", "x"} {
				if r := e.call("GET", "/", "", nil, map[string]string{e2bapi.SandboxIDHeader: sb.SandboxID, e2bapi.SandboxPortHeader: bad}); r.status != http.StatusBadRequest {
					t.Errorf("port %q: %d %s, want 400", bad, r.status, r.body)
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
			sb := e.create(testKey, map[string]any{"templateID": "base", "timeout": 120, "network": map[string]any{"allowPublicTraffic": false}})
			if sb.TrafficAccessToken == nil || len(*sb.TrafficAccessToken) < 32 || *sb.TrafficAccessToken == sb.EnvdAccessToken {
				t.Fatalf("create answered traffic token %v", sb.TrafficAccessToken)
			}
			port := freePort(t)
			e.httpd(sb.SandboxID, port, "private")
			host := fmt.Sprintf("%d-%s.localhost", port, sb.SandboxID)
			for name, hdr := range map[string]map[string]string{
				"no token":         {"Host": host},
				"another's token":  {"Host": host, "E2b-Traffic-Access-Token": strings.Repeat("a", 64)},
				"the envd token":   {"Host": host, "E2b-Traffic-Access-Token": sb.EnvdAccessToken},
				"token as api key": {"Host": host, "X-API-KEY": *sb.TrafficAccessToken},
			} {
				r := e.call("GET", "/", "", nil, hdr)
				if r.status != http.StatusForbidden || strings.Contains(string(r.body), "private") || !strings.Contains(string(r.body), "e2b-traffic-access-token") {
					t.Errorf("%s: %d %q, want 403 naming the header", name, r.status, r.body)
				}
			}
			r := e.call("GET", "/", "", nil, map[string]string{"Host": host, "e2b-traffic-access-token": *sb.TrafficAccessToken})
			if r.status != 200 || strings.TrimSpace(string(r.body)) != "private" {
				t.Fatalf("with the token: %d %q", r.status, r.body)
			}
			// connect answers the token too; list and get do not carry it.
			var c e2bapi.Sandbox
			e.call("POST", "/sandboxes/"+sb.SandboxID+"/connect", testKey, map[string]any{"timeout": 60}, nil).json(t, &c)
			if c.TrafficAccessToken == nil || *c.TrafficAccessToken != *sb.TrafficAccessToken {
				t.Fatalf("connect answered traffic token %v", c.TrafficAccessToken)
			}
			if g := e.call("GET", "/sandboxes/"+sb.SandboxID, testKey, nil, nil); strings.Contains(string(g.body), *sb.TrafficAccessToken) {
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
	a := e.create(testKey, map[string]any{"templateID": "base", "timeout": 120})
	b := e.create(testKey, map[string]any{"templateID": "base", "timeout": 120})
	e.httpd(a.SandboxID, 8000, "only-a")
	if r := e.call("GET", "/", "", nil, map[string]string{"Host": "8000-" + a.SandboxID + ".localhost"}); r.status != 200 {
		t.Fatalf("control: A's port: %d %s", r.status, r.body)
	}
	r := e.call("GET", "/", "", nil, map[string]string{"Host": "8000-" + b.SandboxID + ".localhost"})
	if r.status != http.StatusBadGateway || strings.Contains(string(r.body), "only-a") {
		t.Fatalf("B's port 8000 while A serves it: %d %q", r.status, r.body)
	}
}
