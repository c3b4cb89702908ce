package httpserve

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// shortServer is NewServer's server with a header timeout short enough
// to pass in a test; serve wraps ln or not.
func shortServer(t *testing.T, wrap func(net.Listener) net.Listener) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello") }), 0)
	hs.ReadHeaderTimeout = 200 * time.Millisecond
	go hs.Serve(wrap(ln))
	t.Cleanup(func() { hs.Close() })
	return ln.Addr().String()
}

// get sends one request on c after idling for wait, and reads the answer.
func get(c net.Conn, wait time.Duration) (string, error) {
	time.Sleep(wait)
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return "", err
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// A connection dialled and left unused for longer than the header timeout
// (a spare in a client's idle pool) is still served. Without Listener the
// server hangs up on it, which is the broken pipe the local agent's
// clients saw under load.
func TestFreshIdleConnectionServed(t *testing.T) {
	addr := shortServer(t, func(ln net.Listener) net.Listener { return listen(ln, 10*time.Second, MaxWaiting) })
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if body, err := get(c, 600*time.Millisecond); err != nil || body != "hello" {
		t.Fatalf("after 600 ms idle: %q %v", body, err)
	}

	// The control: net/http alone cuts it off at the header timeout.
	plain := shortServer(t, func(ln net.Listener) net.Listener { return ln })
	c2, err := net.Dial("tcp", plain)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if body, err := get(c2, 600*time.Millisecond); err == nil {
		t.Fatalf("control: the plain server answered %q on a connection idle past its header timeout", body)
	}
}

// A client that sends a byte and then stalls is still cut off at the
// header timeout (slow loris), and one that sends nothing at the idle
// timeout: the wait for the first byte is bounded too.
func TestFirstByteBounds(t *testing.T) {
	addr := shortServer(t, func(ln net.Listener) net.Listener { return listen(ln, 300*time.Millisecond, MaxWaiting) })
	for name, first := range map[string]string{"stalled headers": "GET / HTTP/1.1\r\nHo", "nothing": ""} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, first)
		start := time.Now()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b, err := io.ReadAll(c)
		c.Close()
		if err != nil {
			t.Fatalf("%s: the server kept the connection: %v", name, err)
		}
		if strings.Contains(string(b), "200 OK") {
			t.Fatalf("%s: answered %q", name, b)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("%s: closed after %v", name, d)
		}
	}
}

// Silent connections past the bound go to the server at once and are cut
// at the header timeout, as without Listener; those within it still wait.
// A client that opens connections and sends nothing holds at most
// MaxWaiting of them for the idle timeout.
func TestFirstByteWaitersBounded(t *testing.T) {
	addr := shortServer(t, func(ln net.Listener) net.Listener { return listen(ln, 10*time.Second, 2) })
	var conns []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
		time.Sleep(20 * time.Millisecond) // accepted in this order
	}
	time.Sleep(600 * time.Millisecond) // past the 200 ms header timeout
	for i, c := range conns[:2] {
		if body, err := get(c, 0); err != nil || body != "hello" {
			t.Errorf("connection %d, within the bound: %q %v", i, body, err)
		}
	}
	if body, err := get(conns[2], 0); err == nil {
		t.Errorf("the connection past the bound waited beyond the header timeout: answered %q", body)
	}
}

// Closing the listener closes the connections still waiting for their
// first byte and ends Accept with net.ErrClosed.
func TestListenerCloseEndsWaiting(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := listen(inner, time.Minute, MaxWaiting)
	c, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	accepted := make(chan error, 1)
	go func() {
		_, err := ln.Accept()
		accepted <- err
	}()
	time.Sleep(50 * time.Millisecond) // let the loop take c
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-accepted; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("a waiting connection after Close: %v, want EOF", err)
	}
}

// berth's clients give up an idle connection before the servers they call
// would: uvicorn (vLLM, SGLang, FastAPI) closes one after 5 s, net/http a
// fresh one after HeaderTimeout, and berth's servers after IdleTimeout.
func TestClientIdleBelowServerKeepAlives(t *testing.T) {
	const uvicornKeepAlive = 5 * time.Second
	idle := Transport().IdleConnTimeout
	if idle != ClientIdleTimeout || idle <= 0 || idle >= uvicornKeepAlive || idle >= HeaderTimeout || idle >= IdleTimeout {
		t.Fatalf("clients keep idle connections %v: not below uvicorn's %v, the header timeout %v and the idle timeout %v", idle, uvicornKeepAlive, HeaderTimeout, IdleTimeout)
	}
	if Transport() == http.DefaultTransport {
		t.Fatal("Transport must not hand out the shared default transport")
	}
}
