package sandboxtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/berth-sh/berth/internal/testing/testbin"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/sandbox/sandboxtest/internal/stream"
)

var portCases = []testCase{
	{name: "endpoint", run: testEndpoints},
	{name: "refused", run: testPortsRefused},
	{name: "forward", run: testForward},
}

// Sizes of the port cases.
const (
	wsMessages  = 1000
	streamBytes = 50 << 20
	// portTimeout bounds one request or connection through an endpoint:
	// a port nobody listens on must be answered long before it.
	portTimeout = 30 * time.Second
	// serverStart bounds the wait for the portserver to answer.
	serverStart = time.Minute
)

// testEndpoints: for each network mode of none and public the provider
// has, a sandbox declaring its ports runs the portserver (started by Exec,
// in the background), and through Endpoint: HTTP answers; a WebSocket
// echoes 1,000 messages in order; 50 MB go up and 50 MB come down intact;
// where tcp is claimed, 50 MB are echoed both ways at once over raw TCP;
// a declared port nobody listens on answers a clear error at once, never
// a hang; and where ports are fixed at create, an undeclared one is
// refused.
func testEndpoints(t *testing.T, h Harness) {
	p := open(t, h)
	caps := p.Capabilities()
	if len(caps.Ports) == 0 {
		t.Skip("the provider exposes no ports (refused checks the refusal)")
	}
	bin := portServerBinary(t)
	for _, mode := range []sandbox.NetworkMode{sandbox.NetworkNone, sandbox.NetworkPublic} {
		if !caps.Supports(mode) {
			continue
		}
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			endpointsOn(t, h, p, mode, bin)
		})
	}
}

// portsUnderTest are the ports of one endpoint sandbox.
type portsUnderTest struct {
	http, tcp, closedHTTP, closedTCP, undeclared int
}

func endpointsOn(t *testing.T, h Harness, p *sandbox.Provider, mode sandbox.NetworkMode, bin string) {
	caps := p.Capabilities()
	tcp := caps.ExposesPorts(sandbox.PortTCP)
	free := freePorts(t, 5)
	pt := portsUnderTest{http: free[0], tcp: free[1], closedHTTP: free[2], closedTCP: free[3], undeclared: free[4]}
	declared := []sandbox.Port{{Number: pt.http, Protocol: sandbox.PortHTTP}, {Number: pt.closedHTTP, Protocol: sandbox.PortHTTP}}
	if tcp {
		declared = append(declared, sandbox.Port{Number: pt.tcp, Protocol: sandbox.PortTCP}, sandbox.Port{Number: pt.closedTCP, Protocol: sandbox.PortTCP})
	}
	sb := create(t, h, p, func(s *sandbox.Spec) {
		s.Network = sandbox.Network{Mode: mode}
		s.Ports = declared
	})
	ctx := testContext(t)
	tag := randomHex(8)
	srv := startPortServer(t, ctx, sb, bin, pt, tcp, tag)
	client := endpointClient(h)

	ep, err := sb.Endpoint(ctx, sandbox.Port{Number: pt.http})
	if err != nil {
		t.Fatalf("endpoint of port %d: %v", pt.http, err)
	}
	if ep.Protocol != sandbox.PortHTTP || !strings.HasPrefix(ep.URL, "http") {
		t.Fatalf("endpoint %v: want an http(s) URL", ep)
	}
	waitServing(t, ctx, client, ep, tag, srv)

	t.Run("http", func(t *testing.T) {
		body, status := get(t, ctx, client, ep, "/")
		if status != http.StatusOK || body != "portserver "+tag+"\n" {
			t.Fatalf("GET /: %d %q, want this sandbox's server", status, body)
		}
	})
	t.Run("websocket", func(t *testing.T) { wsEcho(t, ctx, client, ep) })
	t.Run("stream", func(t *testing.T) { httpStream(t, ctx, client, ep) })
	t.Run("tcp", func(t *testing.T) {
		if !tcp {
			t.Skip("the provider exposes no tcp ports (refused checks the refusal)")
		}
		tep, err := sb.Endpoint(ctx, sandbox.Port{Number: pt.tcp, Protocol: sandbox.PortTCP})
		if err != nil {
			t.Fatalf("tcp endpoint: %v", err)
		}
		if !strings.HasPrefix(tep.URL, "tcp://") {
			t.Fatalf("tcp endpoint %v: want a tcp:// URL", tep)
		}
		tcpEcho(t, ctx, tep)
	})
	t.Run("closed", func(t *testing.T) {
		closedHTTP(t, ctx, sb, client, pt.closedHTTP)
		if tcp {
			closedTCP(t, ctx, sb, pt.closedTCP)
		}
	})
	t.Run("undeclared", func(t *testing.T) {
		if !caps.PortsAtCreate {
			t.Skip("the provider exposes ports after create")
		}
		_, err := sb.Endpoint(ctx, sandbox.Port{Number: pt.undeclared})
		wantClass(t, "endpoint of a port the Spec did not declare", err, sandbox.InvalidArgument)
	})
}

// testPortsRefused: what the provider does not claim is NotSupported:
// Endpoint without Capabilities.Ports, a protocol not in it (at Endpoint
// and at Create), DialPort without Capabilities.DialPort.
func testPortsRefused(t *testing.T, h Harness) {
	ctx, p, sb := fresh(t, h)
	caps := p.Capabilities()
	for _, proto := range []sandbox.PortProtocol{sandbox.PortHTTP, sandbox.PortTCP} {
		if caps.ExposesPorts(proto) {
			continue
		}
		_, err := sb.Endpoint(ctx, sandbox.Port{Number: 8000, Protocol: proto})
		wantClass(t, "endpoint of a "+string(proto)+" port without the capability", err, sandbox.NotSupported)
		spec := h.Spec()
		spec.Labels = map[string]string{suiteLabel: "1"}
		spec.Ports = []sandbox.Port{{Number: 8000, Protocol: proto}}
		extra, err := p.Create(ctx, spec)
		if err == nil {
			_ = extra.Delete(ctx)
			_ = extra.Close()
		}
		wantClass(t, "create declaring a "+string(proto)+" port without the capability", err, sandbox.NotSupported)
	}
	if !caps.DialPort {
		_, err := sb.DialPort(ctx, 8000)
		wantClass(t, "dial port without Capabilities.DialPort", err, sandbox.NotSupported)
	}
	_, err := sb.Endpoint(ctx, sandbox.Port{Number: 70000})
	wantClass(t, "endpoint of port 70000", err, sandbox.InvalidArgument)
}

// testForward: with Capabilities.Forward a process in a sandbox without a
// network reaches a host HTTP server at 127.0.0.1:PORT, a second Forward
// of the same port is AlreadyExists, and after Close the port is gone;
// without it Forward is NotSupported.
func testForward(t *testing.T, h Harness) {
	ctx, p, sb := fresh(t, h)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "host says %s", r.URL.Path[1:])
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	port := freePorts(t, 1)[0]
	if !p.Capabilities().Forward {
		_, err := sb.Forward(ctx, port, ln.Addr().String())
		wantClass(t, "forward without Capabilities.Forward", err, sandbox.NotSupported)
		return
	}
	f, err := sb.Forward(ctx, port, ln.Addr().String())
	if err != nil {
		t.Fatalf("forward: %v", err)
	}
	defer f.Close()
	nonce := randomHex(6)
	fetch := fmt.Sprintf("wget -q -O - http://127.0.0.1:%d/%s", port, nonce)
	if res := run(t, ctx, sb, sandbox.Command{Args: sh(fetch), Timeout: commandDeadline}); res.ExitCode != 0 || string(res.Stdout) != "host says "+nonce {
		t.Fatalf("a request to the forwarded port from inside: exit %d, %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	_, err = sb.Forward(ctx, port, ln.Addr().String())
	wantClass(t, "a second forward of the same port", err, sandbox.AlreadyExists)
	if err := f.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	// The agent closes its listener once the host's side is gone.
	deadline := time.Now().Add(10 * time.Second)
	for {
		res := run(t, ctx, sb, sandbox.Command{Args: sh(fetch), Timeout: commandDeadline})
		if res.ExitCode != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the forwarded port still answers after Close: %q", res.Stdout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// portServerBinary builds the portserver static (once per test
// process), or skips when there is no go command.
func portServerBinary(t *testing.T) string {
	t.Helper()
	bin, err := testbin.Static("portserver", "github.com/berth-sh/berth/sandbox/sandboxtest/internal/portserver")
	if errors.Is(err, exec.ErrNotFound) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// freePorts returns n ports free on this host now: providers whose
// sandboxes share the host's network (the in-process fakes) need ports
// no other case uses.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var lns []net.Listener
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}

// started is a portserver started in the background: what it prints,
// and a channel closed if it ends.
type started struct {
	logs  *syncBuffer
	ended chan struct{}
}

// startPortServer uploads the portserver and starts it with Exec, in its
// directory (a fake provider's commands are host programs in a mapped
// working directory), without waiting for it.
func startPortServer(t *testing.T, ctx context.Context, sb *sandbox.Sandbox, bin string, pt portsUnderTest, tcp bool, tag string) started {
	t.Helper()
	f, err := os.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := workDir(t, ctx, sb)
	if err := sb.WriteFrom(ctx, dir+"/portserver", f, 0o755); err != nil {
		t.Fatalf("upload the portserver: %v", err)
	}
	args := []string{"./portserver", "-http", fmt.Sprint(pt.http), "-tag", tag}
	if tcp {
		args = append(args, "-tcp", fmt.Sprint(pt.tcp))
	}
	st := started{logs: &syncBuffer{}, ended: make(chan struct{})}
	proc, err := sb.Exec(ctx, sandbox.Command{Args: args, Dir: dir, Stdout: st.logs, Stderr: st.logs})
	if err != nil {
		t.Fatalf("start the portserver: %v", err)
	}
	go func() {
		_, _ = proc.Wait(ctx)
		close(st.ended)
	}()
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = proc.Signal(sctx, sandbox.SIGKILL) // NotSupported: Delete ends it
	})
	return st
}

// endpointClient is the HTTP client of the port cases: bounded requests,
// the harness's TLS roots.
func endpointClient(h Harness) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = h.EndpointTLS.Clone()
	return &http.Client{Transport: tr, Timeout: portTimeout}
}

func request(ctx context.Context, method string, ep sandbox.Endpoint, path string, body io.Reader) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, method, ep.Join(path), body)
	ep.SetHeaders(req.Header)
	return req
}

func get(t *testing.T, ctx context.Context, c *http.Client, ep sandbox.Endpoint, path string) (string, int) {
	t.Helper()
	res, err := c.Do(request(ctx, http.MethodGet, ep, path, nil))
	if err != nil {
		t.Fatalf("GET %s through %v: %v", path, ep, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	return string(b), res.StatusCode
}

// waitServing polls the endpoint until the portserver answers.
func waitServing(t *testing.T, ctx context.Context, c *http.Client, ep sandbox.Endpoint, tag string, srv started) {
	t.Helper()
	deadline := time.Now().Add(serverStart)
	var last string
	for time.Now().Before(deadline) {
		select {
		case <-srv.ended:
			if ctx.Err() == nil {
				t.Fatalf("the portserver ended before it answered through %v: %q", ep, srv.logs.String())
			}
		default:
		}
		res, err := c.Do(request(ctx, http.MethodGet, ep, "/", nil))
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
			res.Body.Close()
			if res.StatusCode == http.StatusOK && string(b) == "portserver "+tag+"\n" {
				return
			}
			last = fmt.Sprintf("%d %q", res.StatusCode, b)
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the portserver did not answer through %v within %v: last %s; its output: %q", ep, serverStart, last, srv.logs.String())
}

// wsEcho sends wsMessages messages while reading their echoes, and checks
// each arrives whole and in order.
func wsEcho(t *testing.T, ctx context.Context, c *http.Client, ep sandbox.Endpoint) {
	hdr := http.Header{}
	ep.SetHeaders(hdr)
	conn, res, err := websocket.Dial(ctx, ep.WebSocketURL("/ws"), &websocket.DialOptions{HTTPClient: c, HTTPHeader: hdr})
	if err != nil {
		status := 0
		if res != nil {
			status = res.StatusCode
		}
		t.Fatalf("websocket through %v: %v (status %d)", ep, err, status)
	}
	defer conn.CloseNow()
	sent := make(chan error, 1)
	go func() {
		for i := range wsMessages {
			if err := conn.Write(ctx, websocket.MessageText, []byte(fmt.Sprintf("message %d of %d", i, wsMessages))); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	for i := range wsMessages {
		typ, msg, err := conn.Read(ctx)
		if err != nil {
			t.Fatalf("read echo %d: %v", i, err)
		}
		if want := fmt.Sprintf("message %d of %d", i, wsMessages); typ != websocket.MessageText || string(msg) != want {
			t.Fatalf("echo %d: %v %q, want %q", i, typ, msg, want)
		}
	}
	if err := <-sent; err != nil {
		t.Fatalf("send: %v", err)
	}
	if err := conn.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// httpStream uploads streamBytes and checks the server's digest, then
// downloads streamBytes and checks them.
func httpStream(t *testing.T, ctx context.Context, c *http.Client, ep sandbox.Endpoint) {
	seed := randomHex(4)
	want := digest(seed, streamBytes)
	big := &http.Client{Transport: c.Transport} // no overall timeout: ctx bounds it
	req := request(ctx, http.MethodPost, ep, "/sha256", io.LimitReader(stream.New(seed), streamBytes))
	req.ContentLength = streamBytes
	res, err := big.Do(req)
	if err != nil {
		t.Fatalf("upload %d bytes: %v", streamBytes, err)
	}
	b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	res.Body.Close()
	if res.StatusCode != http.StatusOK || string(b) != fmt.Sprintf("%d %s\n", streamBytes, want) {
		t.Fatalf("upload: %d %q, want %d bytes with digest %s", res.StatusCode, b, streamBytes, want)
	}
	res, err = big.Do(request(ctx, http.MethodGet, ep, fmt.Sprintf("/bytes?n=%d&seed=%s", streamBytes, seed), nil))
	if err != nil {
		t.Fatalf("download: %v", err)
	}
	defer res.Body.Close()
	h := sha256.New()
	n, err := io.Copy(h, res.Body)
	if err != nil || res.StatusCode != http.StatusOK || n != streamBytes || hex.EncodeToString(h.Sum(nil)) != want {
		t.Fatalf("download: status %d, %d bytes, err %v: not the %d bytes sent", res.StatusCode, n, err, streamBytes)
	}
}

func digest(seed string, n int64) string {
	h := sha256.New()
	_, _ = io.Copy(h, io.LimitReader(stream.New(seed), n))
	return hex.EncodeToString(h.Sum(nil))
}

// tcpEcho sends streamBytes over raw TCP while reading the echo, once the
// server answers.
func tcpEcho(t *testing.T, ctx context.Context, ep sandbox.Endpoint) {
	addr, err := ep.Addr()
	if err != nil {
		t.Fatal(err)
	}
	// The tunnel may lead nowhere for a moment after the server starts.
	var conn net.Conn
	deadline := time.Now().Add(serverStart)
	for {
		conn, err = dialEcho(ctx, addr)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("tcp endpoint %v: %v", ep, err)
	}
	defer conn.Close()
	seed := randomHex(4)
	sent := make(chan error, 1)
	go func() {
		_, err := io.Copy(conn, io.LimitReader(stream.New(seed), streamBytes))
		if err == nil {
			err = conn.(*net.TCPConn).CloseWrite()
		}
		sent <- err
	}()
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Minute))
	hs := sha256.New()
	n, err := io.Copy(hs, conn)
	if serr := <-sent; serr != nil {
		t.Fatalf("send %d bytes: %v", streamBytes, serr)
	}
	if err != nil || n != streamBytes || hex.EncodeToString(hs.Sum(nil)) != digest(seed, streamBytes) {
		t.Fatalf("echo: %d bytes, err %v: not the %d bytes sent", n, err, streamBytes)
	}
}

// dialEcho connects and checks one round trip.
func dialEcho(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	ping := []byte("ping\n")
	buf := make([]byte, len(ping))
	if _, err = conn.Write(ping); err == nil {
		_, err = io.ReadFull(conn, buf)
	}
	if err != nil || !bytes.Equal(buf, ping) {
		conn.Close()
		return nil, fmt.Errorf("no echo (%v)", err)
	}
	_ = conn.SetDeadline(time.Time{})
	// Read the rest as one stream: hand back a fresh connection.
	conn.Close()
	return d.DialContext(ctx, "tcp", addr)
}

// closedHTTP: an endpoint of a port nobody listens on answers a 5xx with
// a body (or Endpoint itself refuses, or the connection is refused or
// closed), well before portTimeout.
func closedHTTP(t *testing.T, ctx context.Context, sb *sandbox.Sandbox, c *http.Client, port int) {
	ep, err := sb.Endpoint(ctx, sandbox.Port{Number: port})
	if err != nil {
		if sandbox.ClassOf(err) == sandbox.Unknown {
			t.Fatalf("endpoint of a closed port: an unclassed error: %v", err)
		}
		return
	}
	start := time.Now()
	res, err := c.Do(request(ctx, http.MethodGet, ep, "/", nil))
	var ne net.Error
	if err != nil && (errors.As(err, &ne) && ne.Timeout() || time.Since(start) >= portTimeout) {
		t.Fatalf("GET through the endpoint of a closed port hung for %v: %v", time.Since(start), err)
	}
	if err != nil {
		// Refused (a URL straight at the port), or closed without an
		// answer (a tunnel below HTTP, as Modal's): a clear end.
		return
	}
	b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	res.Body.Close()
	if res.StatusCode < 500 || len(bytes.TrimSpace(b)) == 0 {
		t.Fatalf("GET through the endpoint of a closed port: %d %q; want a 5xx saying why", res.StatusCode, b)
	}
}

// closedTCP: a tcp endpoint of a port nobody listens on ends the
// connection (or refuses it) at once.
func closedTCP(t *testing.T, ctx context.Context, sb *sandbox.Sandbox, port int) {
	ep, err := sb.Endpoint(ctx, sandbox.Port{Number: port, Protocol: sandbox.PortTCP})
	if err != nil {
		if sandbox.ClassOf(err) == sandbox.Unknown {
			t.Fatalf("tcp endpoint of a closed port: an unclassed error: %v", err)
		}
		return
	}
	addr, err := ep.Addr()
	if err != nil {
		t.Fatal(err)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return // refused: a clear end
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(portTimeout))
	_, _ = conn.Write([]byte("anyone?\n"))
	n, err := conn.Read(make([]byte, 64))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("a tcp endpoint of a closed port left the connection hanging for %v", portTimeout)
	}
	if n > 0 {
		t.Fatalf("a tcp endpoint of a closed port answered %d bytes", n)
	}
}
