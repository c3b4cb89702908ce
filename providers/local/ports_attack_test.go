package local_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/agent/localagent"
	"github.com/berth-sh/berth/internal/testing/nettest"
	"github.com/berth-sh/berth/sandbox"
)

// hostHTTP serves body on 127.0.0.1 until the test ends and returns its
// address.
func hostHTTP(t *testing.T, body string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// listening returns the sandbox's listening TCP sockets ("addr:port" in
// /proc/net/tcp's hex), IPv4 and IPv6.
func listening(t *testing.T, sb *sandbox.Sandbox) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(sh(t, sb, "cat /proc/net/tcp /proc/net/tcp6"), "\n") {
		f := strings.Fields(line)
		if len(f) > 3 && f[3] == "0A" { // TCP_LISTEN
			out = append(out, f[1])
		}
	}
	return out
}

// The reverse direction on network none: a process in the sandbox
// reaches the host HTTP server it was given through the forwarded port,
// and nothing else of the host: not the host's loopback or its addresses,
// not slirp's alias of the host, not the internet; the sandbox gains no
// route or address, and the only socket listening in it is the forwarded
// port on loopback.
func TestAttackForwardReachesOnlyItsAddress(t *testing.T) {
	p := openProvider(t)
	nonce := secret(t)
	target := hostHTTP(t, nonce)
	const reply = "host-reached"
	loopPort := nettest.Listen(t, "127.0.0.1", reply)
	anyPort := nettest.Listen(t, "0.0.0.0", reply)
	sb := create(t, p, sandbox.Spec{})
	const port = 30000
	f, err := sb.Forward(testCtx(t), port, target)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := sh(t, sb, fmt.Sprintf("wget -q -O - http://127.0.0.1:%d/", port)); got != nonce {
		t.Fatalf("through the forwarded port: %q, want the host server's %q", got, nonce)
	}
	if got := sh(t, sb, fmt.Sprintf("wget -q -O - http://localhost:%d/", port)); got != nonce {
		t.Fatalf("through localhost:%d: %q", port, got)
	}
	nc := func(host string, port int) {
		t.Helper()
		res := attempt(t, sb, "nc", "-w", "2", host, strconv.Itoa(port))
		if res.ExitCode == 0 || res.ExitCode == 127 || strings.Contains(string(res.Stdout), reply) {
			t.Errorf("nc %s %d from the sandbox: exit %d, stdout %q; want a failed connection", host, port, res.ExitCode, res.Stdout)
		}
	}
	_, targetPort, _ := net.SplitHostPort(target)
	tp, _ := strconv.Atoi(targetPort)
	nc("127.0.0.1", loopPort)
	nc("127.0.0.1", anyPort)
	nc("127.0.0.1", tp) // the target itself, at its own address
	for _, a := range nettest.HostIPv4(t) {
		nc(a, anyPort)
		nc(a, tp)
	}
	nc("10.0.2.2", loopPort)
	nc("10.0.2.2", tp)
	nc("1.1.1.1", 53)
	if out := sh(t, sb, "ip route 2>&1; ip -o addr | grep -v ' lo ' || true"); out != "" {
		t.Errorf("forwarding gave the sandbox routes or addresses:\n%s", out)
	}
	want := fmt.Sprintf(":%04X", port)
	for _, l := range listening(t, sb) {
		if !strings.HasSuffix(l, want) || !(strings.HasPrefix(l, "0100007F:") || strings.HasPrefix(l, "00000000000000000000000001000000:")) {
			t.Errorf("a socket listens in the sandbox at %s; only the forwarded port on loopback may", l)
		}
	}
}

// One sandbox's endpoint never reaches another sandbox: B's endpoint and
// DialPort for the port A serves find nothing, and a public sandbox
// cannot reach A's endpoint listener on the host.
func TestAttackEndpointOtherSandbox(t *testing.T) {
	p := openProvider(t)
	ctx := testCtx(t)
	mark := secret(t)
	const port = 8000
	a := create(t, p, sandbox.Spec{})
	sh(t, a, fmt.Sprintf("mkdir -p /tmp/www && echo %s > /tmp/www/index.html && httpd -p %d -h /tmp/www", mark, port))
	b := create(t, p, sandbox.Spec{})
	epA, err := a.Endpoint(ctx, sandbox.Port{Number: port})
	if err != nil {
		t.Fatal(err)
	}
	if body, status := httpGet(t, epA.Join("/")); status != 200 || strings.TrimSpace(body) != mark {
		t.Fatalf("control: A's own endpoint: %d %q", status, body)
	}
	epB, err := b.Endpoint(ctx, sandbox.Port{Number: port})
	if err != nil {
		t.Fatal(err)
	}
	if body, status := httpGet(t, epB.Join("/")); status != http.StatusBadGateway || strings.Contains(body, mark) {
		t.Fatalf("B's endpoint of the port A serves: %d %q, want 502 and nothing of A's", status, body)
	}
	if c, err := b.DialPort(ctx, port); sandbox.ClassOf(err) != sandbox.Unavailable {
		if c != nil {
			c.Close()
		}
		t.Fatalf("B's DialPort of the port A serves: %v, want Unavailable", err)
	}
	if _, err := exec.LookPath("slirp4netns"); err != nil {
		t.Skip("network public needs slirp4netns: apt-get install slirp4netns")
	}
	c := create(t, p, sandbox.Spec{Network: sandbox.Network{Mode: sandbox.NetworkPublic}})
	_, hostPort, _ := net.SplitHostPort(strings.TrimPrefix(epA.URL, "http://"))
	hosts := append([]string{"10.0.2.2", "127.0.0.1"}, nettest.HostIPv4(t)...)
	for _, h := range hosts {
		res := attempt(t, c, "sh", "-c", fmt.Sprintf("wget -q -O - http://%s:%s/", h, hostPort))
		if res.ExitCode == 0 || strings.Contains(string(res.Stdout), mark) {
			t.Errorf("a public sandbox reached A's endpoint at %s:%s: exit %d %q", h, hostPort, res.ExitCode, res.Stdout)
		}
	}
}

func httpGet(t *testing.T, url string) (string, int) {
	t.Helper()
	c := &http.Client{Timeout: 30 * time.Second}
	res, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<16))
	return string(b), res.StatusCode
}

// The host side of an endpoint listens on 127.0.0.1 only: the URL says
// so, the kernel's table says so, and the host's other addresses refuse
// the port. Endpoint opens nothing inside the sandbox.
func TestEndpointListensOnLoopbackOnly(t *testing.T) {
	p := openProvider(t)
	ctx := testCtx(t)
	sb := create(t, p, sandbox.Spec{})
	before := listening(t, sb)
	ep, err := sb.Endpoint(ctx, sandbox.Port{Number: 8000, Protocol: sandbox.PortTCP})
	if err != nil {
		t.Fatal(err)
	}
	addr, err := ep.Addr()
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(addr)
	if host != "127.0.0.1" || !ep.Local {
		t.Fatalf("endpoint %v: want a local listener on 127.0.0.1", ep)
	}
	n, _ := strconv.Atoi(port)
	// This thread's table: /proc/net is the main thread's, which another
	// test's namespace helper might have left elsewhere.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tables, err := os.ReadFile("/proc/thread-self/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(tables), fmt.Sprintf("0100007F:%04X 00000000:0000 0A", n)) {
		t.Fatalf("no listening socket 127.0.0.1:%d in the host's /proc/net/tcp", n)
	}
	tables6, _ := os.ReadFile("/proc/thread-self/net/tcp6")
	if strings.Contains(string(tables6), fmt.Sprintf(":%04X 00000000000000000000000000000000:0000 0A", n)) {
		t.Fatalf("port %d listens on IPv6 too", n)
	}
	for _, a := range nettest.HostIPv4(t) {
		if c, err := net.DialTimeout("tcp", net.JoinHostPort(a, port), 2*time.Second); err == nil {
			c.Close()
			t.Errorf("the endpoint's port answers on the host's address %s", a)
		}
	}
	// A connection through it to a closed port: nothing opens inside.
	if c, err := net.Dial("tcp", addr); err == nil {
		_, _ = io.Copy(io.Discard, c)
		c.Close()
	}
	if after := listening(t, sb); len(after) != len(before) {
		t.Fatalf("listening sockets in the sandbox went from %v to %v", before, after)
	}
}

// The agent's port routes need the sandbox's token, and a connection the
// agent accepted for a forward cannot be taken by guessing its ID.
func TestAttackAgentPortRoutes(t *testing.T) {
	p := openProvider(t)
	ctx := testCtx(t)
	sb := create(t, p, sandbox.Spec{})
	socket := agentSocket(t, sb.ID())
	bad := localagent.PortClient{Socket: socket, Token: strings.Repeat("0", 64)}
	if c, err := bad.Dial(ctx, 8000); sandbox.ClassOf(err) != sandbox.Unauthenticated {
		if c != nil {
			c.Close()
		}
		t.Errorf("dial with a wrong token: %v, want Unauthenticated", err)
	}
	if l, err := bad.Listen(ctx, 31000); sandbox.ClassOf(err) != sandbox.Unauthenticated {
		if l != nil {
			l.Close()
		}
		t.Errorf("listen with a wrong token: %v, want Unauthenticated", err)
	}
	if out := sh(t, sb, "cat /proc/net/tcp | awk '$4 == \"0A\"' | wc -l"); out != "0" {
		t.Errorf("a refused listen left %s listening sockets", out)
	}
	good := localagent.PortClient{Socket: socket, Token: sandboxToken(t, sb.ID())}
	if c, err := good.Accept(ctx, strings.Repeat("ab", 16)); sandbox.ClassOf(err) != sandbox.NotFound {
		if c != nil {
			c.Close()
		}
		t.Errorf("accept of a made-up connection: %v, want NotFound", err)
	}
	if c, err := good.Dial(ctx, 0); sandbox.ClassOf(err) != sandbox.InvalidArgument {
		if c != nil {
			c.Close()
		}
		t.Errorf("dial of port 0: %v, want InvalidArgument", err)
	}
}

// agentSocket is the host path of a sandbox's agent socket.
func agentSocket(t *testing.T, id string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(stateDir, "sandboxes", id, "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Socket string `json:"socket"`
	}
	if err := json.Unmarshal(b, &m); err != nil || m.Socket == "" {
		t.Fatalf("meta.json of %s: %v", id, err)
	}
	return m.Socket
}
