package hudserve_test

import (
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berth-sh/berth/hud"
	"github.com/berth-sh/berth/hud/hudserve"
)

// mcpSession connects the official Go MCP SDK's client to the session's
// tools binding, every HTTP connection a tunnel.open on the control port.
func mcpSession(t *testing.T, c *hud.Client, token string) (*mcp.ClientSession, error) {
	t.Helper()
	b, err := c.Binding("mcp")
	if err != nil {
		t.Fatal(err)
	}
	if token == "" {
		token = b.Params["auth_token"].(string)
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := cl.Connect(t.Context(), &mcp.StreamableClientTransport{
		Endpoint: b.URL, HTTPClient: hud.HTTPClient(c.Addr(), b.Name, token), DisableStandaloneSSE: true, MaxRetries: -1,
	}, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

func bash(t *testing.T, cs *mcp.ClientSession, command string) (string, int, bool) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": command}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		return res.Content[0].(*mcp.TextContent).Text, -1, true
	}
	out := res.StructuredContent.(map[string]any)
	return out["output"].(string), int(out["exit_code"].(float64)), false
}

// TestMCPClientOverTunnel: the official Go MCP SDK's client lists the
// tools and calls them through tunnel.open connections.
func TestMCPClientOverTunnel(t *testing.T) {
	f := newFixture(t, hud.Limits{})
	c := f.client(t)
	cs, err := mcpSession(t, c, "")
	if err != nil {
		t.Fatal(err)
	}
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	if !reflect.DeepEqual(names, []string{"bash", "list_dir", "read_file", "write_file"}) {
		t.Errorf("tools: %v", names)
	}
	// Before tasks.start the tools say so.
	if msg, _, isErr := bash(t, cs, "true"); !isErr || !strings.Contains(msg, "no task in progress") {
		t.Errorf("before start: %q", msg)
	}
	if _, err := c.Start(t.Context(), "answer", nil); err != nil {
		t.Fatal(err)
	}
	// stdout and stderr both land in the output (their order is the
	// streams' race).
	if out, code, _ := bash(t, cs, "echo out; echo err >&2; exit 3"); (out != "out\nerr\n" && out != "err\nout\n") || code != 3 {
		t.Errorf("bash: %q, exit %d", out, code)
	}
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "write_file", Arguments: map[string]any{"path": "/tmp/answer", "content": "42\n"}}); err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "/tmp/answer"}})
	if err != nil || res.IsError || res.StructuredContent.(map[string]any)["content"] != "42\n" {
		t.Fatalf("read_file: %+v, %v", res, err)
	}
	g, err := c.Grade(t.Context(), map[string]any{"answer": "42"})
	if err != nil || g.Score != 1 {
		t.Fatalf("grade: %+v, %v", g, err)
	}
}

// TestSessionsIsolated: two sessions run at once, each in its own
// sandbox; one's credentials reach nothing of the other's.
func TestSessionsIsolated(t *testing.T) {
	f := newFixture(t, hud.Limits{})
	a, b := f.client(t), f.client(t)
	for _, c := range []*hud.Client{a, b} {
		if _, err := c.Start(t.Context(), "answer", nil); err != nil {
			t.Fatal(err)
		}
	}
	f.mu.Lock()
	if len(f.events) != 2 || f.events[0].Sandbox == f.events[1].Sandbox || f.events[0].Session == f.events[1].Session {
		t.Fatalf("events: %+v", f.events)
	}
	f.mu.Unlock()
	csA, err := mcpSession(t, a, "")
	if err != nil {
		t.Fatal(err)
	}
	csB, err := mcpSession(t, b, "")
	if err != nil {
		t.Fatal(err)
	}
	bash(t, csA, "echo a > /tmp/who")
	if out, _, _ := bash(t, csB, "cat /tmp/who 2>&1 || echo none"); strings.Contains(out, "a\n") && !strings.Contains(out, "none") {
		t.Errorf("session b sees a's file: %q", out)
	}
	// a's token on b's URL, and b's binding with a's token, are refused.
	tokA := a.Manifest.Bindings[0].Params["auth_token"].(string)
	if _, err := mcpSession(t, b, tokA); err == nil || !strings.Contains(err.Error(), http.StatusText(http.StatusUnauthorized)) {
		t.Errorf("a's token on b's session: %v", err)
	}
	// b resuming a's live session is refused; b's grade is b's own.
	if _, err := b.Hello(t.Context(), a.Manifest.SessionID); err == nil {
		t.Error("b took over a's live session")
	}
	bash(t, csB, "echo 42 > /tmp/answer")
	gb, err := b.Grade(t.Context(), nil)
	if err != nil || gb.Score != 1 {
		t.Fatalf("b: %+v %v", gb, err)
	}
	ga, err := a.Grade(t.Context(), nil)
	if err != nil || ga.Score != 0 {
		t.Fatalf("a got b's answer: %+v %v", ga, err)
	}
}

// TestVanishedClient: a client that drops its connection without bye has
// its sandbox deleted once the heartbeat window passes; one that resumes
// within the window and heartbeats keeps it; one that goes silent on an open connection
// is cut off at the window and its sandbox deleted.
func TestVanishedClient(t *testing.T) {
	const window = 400 * time.Millisecond
	f := newFixture(t, hud.Limits{HeartbeatWindow: window})
	created := func(e hudserve.Event) bool { return !e.Deleted }

	// Dropped, resumed within the window: the task goes on.
	c := f.client(t)
	if _, err := c.Start(t.Context(), "answer", nil); err != nil {
		t.Fatal(err)
	}
	sb := f.waitEvent(t, time.Second, created).Sandbox
	sid := c.Manifest.SessionID
	c.Close()
	time.Sleep(window / 4)
	if live, parked := f.srv.Sessions(); live != 0 || parked != 1 {
		t.Errorf("after the drop: %d live, %d parked", live, parked)
	}
	later := f.client(t)
	if _, err := later.Hello(t.Context(), sid); err != nil {
		t.Fatal(err)
	}
	// Its heartbeat (hello with the session's id) keeps it past the window.
	later.Heartbeat(window / 4)
	time.Sleep(3 * window)
	if f.srv.Sandboxes() != 1 {
		t.Fatal("a resumed, heartbeating session lost its sandbox")
	}

	// Dropped for good: deleted after the window, not before.
	t0 := time.Now()
	later.Close()
	e := f.waitEvent(t, 10*time.Second, func(e hudserve.Event) bool { return e.Deleted })
	if e.Sandbox != sb || time.Since(t0) < window {
		t.Errorf("deleted %s after %v; want %s after at least %v", e.Sandbox, time.Since(t0), sb, window)
	}
	if _, err := f.prov.Connect(t.Context(), sb); err == nil {
		t.Errorf("sandbox %s still on the provider", sb)
	}
	if live, parked := f.srv.Sessions(); live+parked != 0 {
		t.Errorf("sessions left: %d live, %d parked", live, parked)
	}

	// Silent on an open connection: cut off at the window.
	r := dialRaw(t, f.addr)
	r.exchange(`{"jsonrpc":"2.0","id":1,"method":"tasks.start","params":{"id":"answer","args":{}}}`)
	sb = f.waitEvent(t, time.Second, created).Sandbox
	t0 = time.Now()
	e = f.waitEvent(t, 10*time.Second, func(e hudserve.Event) bool { return e.Deleted })
	if e.Sandbox != sb || time.Since(t0) < window/2 {
		t.Errorf("silent session: deleted %s after %v", e.Sandbox, time.Since(t0))
	}
}
