package hudserve_test

import (
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/hud"
)

// TestWireFrames replays, byte for byte, the frames HUD's Python client
// writes (hud/clients/client.py: compact json.dumps, ids 1, 2, 3... per
// connection, the heartbeat hello with the session's id, tunnel.open with
// id 1 as a connection's first frame) and checks the replies as HUD's
// server (hud/environment/server.py) words them: exact frames for errors,
// exact results where they hold no random value.
func TestWireFrames(t *testing.T) {
	f := newFixture(t, hud.Limits{})
	c := dialRaw(t, f.addr)

	// hello: a fresh session, the env's name, the two bindings.
	hello := c.exchange(`{"jsonrpc":"2.0","id":1,"method":"hello","params":{}}`)
	res := hello["result"].(map[string]any)
	sid := res["session_id"].(string)
	if hello["id"] != 1.0 || hello["jsonrpc"] != "2.0" || !strings.HasPrefix(sid, "sess-") || len(sid) != 37 {
		t.Fatalf("hello: %v", hello)
	}
	if !reflect.DeepEqual(res["env"], map[string]any{"name": "berth-harbor", "version": "test"}) {
		t.Errorf("env: %v", res["env"])
	}
	bindings := res["bindings"].([]any)
	if len(bindings) != 2 {
		t.Fatalf("bindings: %v", bindings)
	}
	mcpB, sshB := bindings[0].(map[string]any), bindings[1].(map[string]any)
	if mcpB["name"] != "tools" || mcpB["protocol"] != "mcp/2025-11-25" || mcpB["url"] != "http://"+f.addr+"/sessions/"+sid+"/mcp" {
		t.Errorf("mcp binding: %v", mcpB)
	}
	if p := mcpB["params"].(map[string]any); p["transport"] != "streamable-http" || len(p["auth_token"].(string)) != 64 {
		t.Errorf("mcp params: %v", p)
	}
	if sshB["name"] != "shell" || sshB["protocol"] != "ssh/2" || sshB["url"] != "ssh://"+f.addr {
		t.Errorf("ssh binding: %v", sshB)
	}
	p := sshB["params"].(map[string]any)
	if p["user"] != "agent" || p["shell"] != "bash" || !strings.HasPrefix(p["host_pubkey"].(string), "ssh-ed25519 ") ||
		!strings.HasPrefix(p["client_key"].(string), "-----BEGIN OPENSSH PRIVATE KEY-----") {
		t.Errorf("ssh params: %v", p)
	}

	// tasks.list: the task, its first instruction line, and the args schema
	// of a task that takes none.
	list := c.exchange(`{"jsonrpc":"2.0","id":2,"method":"tasks.list","params":{}}`)
	want := map[string]any{"jsonrpc": "2.0", "id": 2.0, "result": map[string]any{"tasks": []any{map[string]any{
		"id": "answer", "description": "Write 42 to /tmp/answer.",
		"args": map[string]any{"properties": map[string]any{}, "type": "object", "additionalProperties": false},
	}}}}
	if !reflect.DeepEqual(list, want) {
		t.Errorf("tasks.list:\n got %v\nwant %v", list, want)
	}

	// Errors, exactly as HUD's server writes them.
	for _, x := range []struct{ send, want string }{
		{`{"jsonrpc":"2.0","id":3,"method":"tasks.grade","params":{"answer":"42"}}`,
			`{"jsonrpc":"2.0","id":3,"error":{"code":-32600,"message":"no task in progress"}}`},
		{`{"jsonrpc":"2.0","id":4,"method":"tasks.frobnicate","params":{}}`,
			`{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"method not found: tasks.frobnicate"}}`},
		// A control session never turns into a stream.
		{`{"jsonrpc":"2.0","id":5,"method":"tunnel.open","params":{"capability":"tools"}}`,
			`{"jsonrpc":"2.0","id":5,"error":{"code":-32601,"message":"method not found: tunnel.open"}}`},
		{`{"jsonrpc":"2.0","id":6,"method":"tasks.start","params":{"id":"nope","args":{}}}`,
			`{"jsonrpc":"2.0","id":6,"error":{"code":-32602,"message":"unknown task: 'nope'"}}`},
		{`{"jsonrpc":"2.0","id":7,"method":"tasks.start","params":{"id":7,"args":{}}}`,
			`{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"tasks.start: 'id' must be a string"}}`},
		{`{"jsonrpc":"2.0","id":8,"method":"tasks.start","params":{"id":"answer","args":[]}}`,
			`{"jsonrpc":"2.0","id":8,"error":{"code":-32602,"message":"tasks.start: 'args' must be an object"}}`},
		{`{"jsonrpc":"2.0","id":9,"method":"hello","params":{"session_id":"sess-nope"}}`,
			`{"jsonrpc":"2.0","id":9,"error":{"code":-32600,"message":"unknown session: 'sess-nope'"}}`},
		{`{"jsonrpc":"2.0","id":10,"method":"hello","params":{"session_id":5}}`,
			`{"jsonrpc":"2.0","id":10,"error":{"code":-32602,"message":"hello: 'session_id' must be a string"}}`},
		{`{"jsonrpc":"2.0","id":11,"method":"tasks.cancel","params":{}}`,
			`{"jsonrpc":"2.0","id":11,"result":{"cancelled":true}}`},
	} {
		c.send(x.send)
		if got := c.line(); got != x.want {
			t.Errorf("sent %s\n got %s\nwant %s", x.send, got, x.want)
		}
	}
	// A notification (no id) is handled and not answered: the next reply
	// is the next request's.
	c.send(`{"jsonrpc":"2.0","method":"tasks.cancel","params":{}}`)

	// The heartbeat: hello with the session's own id keeps the session.
	beat := c.exchange(`{"jsonrpc":"2.0","id":12,"method":"hello","params":{"session_id":"` + sid + `"}}`)
	if beat["id"] != 12.0 || beat["result"].(map[string]any)["session_id"] != sid {
		t.Errorf("heartbeat: %v", beat)
	}

	// tasks.start: the instruction is the prompt.
	c.send(`{"jsonrpc":"2.0","id":13,"method":"tasks.start","params":{"id":"answer","args":{}}}`)
	if got, want := c.line(), `{"jsonrpc":"2.0","id":13,"result":{"prompt":"Write 42 to /tmp/answer.\n"}}`; got != want {
		t.Errorf("tasks.start:\n got %s\nwant %s", got, want)
	}
	// Another connection cannot take over a live session.
	other := dialRaw(t, f.addr)
	other.send(`{"jsonrpc":"2.0","id":1,"method":"hello","params":{"session_id":"` + sid + `"}}`)
	if got, want := other.line(), `{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"session '`+sid+`' has a live connection"}}`; got != want {
		t.Errorf("resume of a live session:\n got %s\nwant %s", got, want)
	}
	// Nothing was solved: the verifier scores 0, without error.
	grade := c.exchange(`{"jsonrpc":"2.0","id":14,"method":"tasks.grade","params":{"answer":"done"}}`)
	wantGrade := map[string]any{"score": 0.0, "done": true, "content": nil, "info": map[string]any{"rewards": map[string]any{"reward": 0.0}}, "isError": false, "subscores": nil}
	if grade["id"] != 14.0 || !reflect.DeepEqual(grade["result"], wantGrade) {
		t.Errorf("tasks.grade: %v", grade)
	}
	// The grade ended the task.
	c.send(`{"jsonrpc":"2.0","id":15,"method":"tasks.grade","params":{"answer":"again"}}`)
	if got := c.line(); got != `{"jsonrpc":"2.0","id":15,"error":{"code":-32600,"message":"no task in progress"}}` {
		t.Errorf("second grade: %s", got)
	}
	c.send(`{"jsonrpc":"2.0","id":16,"method":"bye","params":{}}`)
	if got := c.line(); got != `{"jsonrpc":"2.0","id":16,"result":{"goodbye":true}}` {
		t.Errorf("bye: %s", got)
	}
	_ = c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.r.ReadByte(); err != io.EOF {
		t.Errorf("after bye the server must hang up: %v", err)
	}
}

// TestTunnelPreface: tunnel.open is decided by a connection's first frame,
// answered {"capability": name} with the request's id; an unknown
// capability is refused as HUD words a KeyError, a bad name as a
// ValueError.
func TestTunnelPreface(t *testing.T) {
	f := newFixture(t, hud.Limits{})
	for _, x := range []struct{ send, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":"tunnel.open","params":{"capability":"nope"}}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"\"unknown capability: 'nope'\""}}`},
		{`{"jsonrpc":"2.0","id":1,"method":"tunnel.open","params":{"capability":3}}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"tunnel.open: 'capability' must be a string"}}`},
		{`{"jsonrpc":"2.0","id":1,"method":"tunnel.open","params":{"capability":"tools"}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"capability":"tools"}}`},
		{`{"jsonrpc":"2.0","id":1,"method":"tunnel.open","params":{"capability":"shell"}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"capability":"shell"}}`},
	} {
		c := dialRaw(t, f.addr)
		c.send(x.send)
		if got := c.line(); got != x.want {
			t.Errorf("sent %s\n got %s\nwant %s", x.send, got, x.want)
		}
		c.c.Close()
	}
	// After the reply the bytes are the capability's own: here an SSH
	// server's version line.
	c := dialRaw(t, f.addr)
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tunnel.open","params":{"capability":"shell"}}`)
	c.line()
	if banner := c.line(); banner != "SSH-2.0-berth\r" {
		t.Errorf("banner after tunnel.open: %q", banner)
	}
	var m map[string]any
	_ = json.Unmarshal(nil, &m)
}
