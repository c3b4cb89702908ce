package hud_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/berth-sh/berth/hud"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// stubEnv is an environment whose one task needs nothing; it counts the
// sessions closed.
type stubEnv struct{ closed atomic.Int32 }

func (e *stubEnv) Info() hud.EnvInfo { return hud.EnvInfo{Name: "stub", Version: "1"} }
func (e *stubEnv) ListTasks(context.Context) ([]hud.TaskEntry, error) {
	return []hud.TaskEntry{{ID: "t", Args: hud.NoArgs()}}, nil
}
func (e *stubEnv) NewSession(context.Context, string) (hud.Session, error) {
	return &stubSession{env: e}, nil
}
func (e *stubEnv) Tunnel(_ context.Context, name string) (hud.TunnelFunc, error) {
	if name != "echo" {
		return nil, errors.New("no such capability")
	}
	return func(_ context.Context, c net.Conn) { defer c.Close(); _, _ = io.Copy(c, c) }, nil
}

type stubSession struct {
	env     *stubEnv
	started bool
}

func (s *stubSession) Bindings() []hud.Binding { return nil }
func (s *stubSession) Start(context.Context, string, map[string]any) (any, error) {
	s.started = true
	return map[string]any{"prompt": "go"}, nil
}
func (s *stubSession) Grade(context.Context, map[string]any) (any, error) {
	return map[string]any{"score": 1.0}, nil
}
func (s *stubSession) Cancel(context.Context) error { s.started = false; return nil }
func (s *stubSession) InProgress() bool             { return s.started }
func (s *stubSession) Close(context.Context)        { s.env.closed.Add(1) }

func serve(t *testing.T, lim hud.Limits) (*hud.Server, *stubEnv, string) {
	t.Helper()
	env := &stubEnv{}
	srv := hud.NewServer(env, lim, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return srv, env, ln.Addr().String()
}

// cutOff reports whether the server hangs up on c within d, and what it
// wrote first.
func cutOff(t *testing.T, c net.Conn, d time.Duration) (string, bool) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	b, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return string(b), false
	}
	return string(b), true
}

// TestSlowLoris: a peer that trickles one byte a second, never ends its
// line, or never speaks is cut off at the limits, and a control session
// cut off that way is ended.
func TestSlowLoris(t *testing.T) {
	lim := hud.Limits{MaxFrame: 1024, FirstFrame: 300 * time.Millisecond, Frame: 300 * time.Millisecond, HeartbeatWindow: 5 * time.Second}
	_, env, addr := serve(t, lim)

	t.Run("silent", func(t *testing.T) {
		c, _ := net.Dial("tcp", addr)
		defer c.Close()
		if _, ok := cutOff(t, c, 3*time.Second); !ok {
			t.Error("a connection that never sends its first frame is held")
		}
	})
	t.Run("trickle", func(t *testing.T) {
		c, _ := net.Dial("tcp", addr)
		defer c.Close()
		t0 := time.Now()
		sent := 0
		for _, b := range []byte(`{"jsonrpc":"2.0","id":1,"method":"hello"}`) {
			if _, err := c.Write([]byte{b}); err != nil {
				break
			}
			sent++
			if _, ok := cutOff(t, c, time.Second); ok {
				break
			}
		}
		if sent > 3 || time.Since(t0) > 5*time.Second {
			t.Errorf("a one-byte-a-second peer got %d bytes in over %v", sent, time.Since(t0))
		}
	})
	t.Run("no newline", func(t *testing.T) {
		c, _ := net.Dial("tcp", addr)
		defer c.Close()
		go func() { _, _ = c.Write([]byte(strings.Repeat("a", 4096))) }()
		out, ok := cutOff(t, c, 3*time.Second)
		if !ok || !strings.Contains(out, `"code":-32600`) || !strings.Contains(out, "frame too large") {
			t.Errorf("an endless line: cut %v, reply %q", ok, out)
		}
	})
	t.Run("trickle mid-session", func(t *testing.T) {
		before := env.closed.Load()
		c, _ := net.Dial("tcp", addr)
		defer c.Close()
		r := bufio.NewReader(c)
		_, _ = c.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"tasks.start","params":{"id":"t"}}` + "\n"))
		if l, err := r.ReadString('\n'); err != nil || !strings.Contains(l, `"prompt":"go"`) {
			t.Fatalf("start: %q %v", l, err)
		}
		_, _ = c.Write([]byte(`{"jsonrpc"`))
		if _, ok := cutOff(t, c, 3*time.Second); !ok {
			t.Fatal("a frame begun and never ended is held")
		}
		// Its task was in progress: it is parked, not ended, until the
		// window passes.
		time.Sleep(100 * time.Millisecond)
		if env.closed.Load() != before {
			t.Error("a dropped session with a task was ended at once")
		}
	})
}

// TestMaxConns: connections past the limit are closed at once, and a
// tunnel holds its slot until it closes.
func TestMaxConns(t *testing.T) {
	_, _, addr := serve(t, hud.Limits{MaxConns: 2})
	var tunnels []net.Conn
	for range 2 {
		c, err := hud.DialTunnel(t.Context(), addr, "echo")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		tunnels = append(tunnels, c)
	}
	c, _ := net.Dial("tcp", addr)
	defer c.Close()
	if _, ok := cutOff(t, c, 2*time.Second); !ok {
		t.Error("a third connection was served past MaxConns 2")
	}
	// The tunnels still carry bytes.
	_, _ = tunnels[0].Write([]byte("ping"))
	b := make([]byte, 4)
	if _, err := io.ReadFull(tunnels[0], b); err != nil || string(b) != "ping" {
		t.Errorf("tunnel: %q %v", b, err)
	}
	tunnels[1].Close()
	time.Sleep(100 * time.Millisecond)
	if _, err := hud.DialTunnel(t.Context(), addr, "echo"); err != nil {
		t.Errorf("a freed slot was not given back: %v", err)
	}
}

// TestClientChecksReplyIDs: a reply whose id is not the request's is a
// protocol error that closes the client, as HUD's client aborts.
func TestClientChecksReplyIDs(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = bufio.NewReader(c).ReadString('\n')
		_, _ = c.Write([]byte(`{"jsonrpc":"2.0","id":2,"result":{}}` + "\n"))
	}()
	c, err := hud.Dial(t.Context(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ListTasks(t.Context()); err == nil || !strings.Contains(err.Error(), "did not match") {
		t.Errorf("mismatched id: %v", err)
	}
	if _, err := c.ListTasks(t.Context()); !errors.Is(err, net.ErrClosed) {
		t.Errorf("client still open after a protocol error: %v", err)
	}
}
