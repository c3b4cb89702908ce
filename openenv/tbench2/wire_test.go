package tbench2_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// The frames OpenEnv's Python client sends, byte for byte: EnvClient
// json.dumps()es {"type": ..., "data": ...} with Python's default
// separators, and Tbench2Env._step_payload sends every action field
// (src/openenv/core/env_client.py, envs/tbench2_env/client.py). reset takes
// its kwargs as data; close is EnvClient.disconnect's message. The
// malformed frame is one cut short; the unknown type is one no server
// knows; the invalid action has a field Tbench2Action forbids.
var wireFrames = []struct {
	name, frame string
	want        string // the exact answer; "" when the server closes instead
	close       websocket.StatusCode
}{
	{"reset", `{"type": "reset", "data": {"task_id": "answer", "episode_id": "ep-1"}}`,
		`{"type":"observation","data":{"observation":{"instruction":"Write 42 to /tmp/answer.\n","output":"","success":true,"error":"","task_id":"answer","task_path":"answer","session_id":null,"action_type":"reset","info":{"provider":"fake","sandbox_id":"SANDBOX"}},"reward":0.0,"done":false}}`, 0},
	{"step exec", `{"type": "step", "data": {"action_type": "exec", "command": "echo hello", "session_id": null, "block": true, "wait_seconds": null, "file_path": "", "content": ""}}`,
		`{"type":"observation","data":{"observation":{"instruction":"Write 42 to /tmp/answer.\n","output":"hello\n","success":true,"error":"","task_id":"answer","task_path":"answer","session_id":"tb2-session","action_type":"exec","info":{"exit_code":0}},"reward":null,"done":false}}`, 0},
	{"state", `{"type": "state"}`,
		`{"type":"state","data":{"episode_id":"ep-1","step_count":1,"task_id":"answer","task_path":"answer","session_id":"tb2-session","terminal_ready":true,"last_action_type":"exec","last_command":"echo hello","last_output":"hello\n"}}`, 0},
	{"malformed", `{"type": "step", "data": {"action_type": "exec"`,
		`{"type":"error","data":{"message":"Invalid JSON: unexpected end of JSON input","code":"INVALID_JSON"}}`, 0},
	{"unknown type", `{"type": "ping"}`,
		`{"type":"error","data":{"message":"Unknown message type: ping","code":"UNKNOWN_TYPE"}}`, 0},
	{"invalid action", `{"type": "step", "data": {"action_type": "exec", "cmd": "ls", "block": "yes please"}}`,
		`{"type":"error","data":{"message":"Invalid message","code":"VALIDATION_ERROR","errors":[{"type":"bool_type","loc":["block"],"msg":"Input should be a valid boolean","input":"yes please"},{"type":"extra_forbidden","loc":["cmd"],"msg":"Extra inputs are not permitted","input":"ls"}]}}`, 0},
	{"step evaluate", `{"type": "step", "data": {"action_type": "evaluate", "command": "", "session_id": null, "block": true, "wait_seconds": null, "file_path": "", "content": ""}}`,
		`{"type":"observation","data":{"observation":{"instruction":"Write 42 to /tmp/answer.\n","output":"","success":true,"error":"","task_id":"answer","task_path":"answer","session_id":"tb2-session","action_type":"evaluate","info":{"harness":"tests/test.sh","tests_passed":false}},"reward":0.0,"done":true}}`, 0},
	{"close", `{"type": "close"}`, "", websocket.StatusNormalClosure},
}

var sandboxID = regexp.MustCompile(`"sandbox_id":"[^"]*"`)

func normalize(s string) string { return sandboxID.ReplaceAllString(s, `"sandbox_id":"SANDBOX"`) }

// reply is what one frame got: an answer, or the connection's close.
type reply struct {
	Reply *string              `json:"reply"`
	Close websocket.StatusCode `json:"close"`
	Error *string              `json:"error"`
}

func checkReplies(t *testing.T, e *env, client string, got []reply) {
	t.Helper()
	if len(got) != len(wireFrames) {
		t.Fatalf("%s: %d replies to %d frames: %+v", client, len(got), len(wireFrames), got)
	}
	for i, w := range wireFrames {
		g := got[i]
		switch {
		case g.Error != nil:
			t.Errorf("%s, %s: %s", client, w.name, *g.Error)
		case w.want == "" && (g.Reply != nil || g.Close != w.close):
			t.Errorf("%s, %s: want the connection closed with %v, got %+v", client, w.name, w.close, g)
		case w.want != "" && (g.Reply == nil || normalize(*g.Reply) != w.want):
			t.Errorf("%s, %s:\n got %v\nwant %s", client, w.name, deref(g.Reply), w.want)
		}
	}
	// By the time the connection closed, the sandbox was gone.
	if n := e.live(); n != 0 {
		t.Errorf("%s: %d sandboxes after close", client, n)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<no answer>"
	}
	return *s
}

// TestWireFidelity replays the Python client's frames with a Go WebSocket
// client and checks every answer byte for byte.
func TestWireFidelity(t *testing.T) {
	e := newEnv(t, nil)
	ctx := t.Context()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(e.url, "http")+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	var got []reply
	for _, w := range wireFrames {
		if err := c.Write(ctx, websocket.MessageText, []byte(w.frame)); err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		_, b, err := c.Read(rctx)
		cancel()
		if err != nil {
			got = append(got, reply{Close: websocket.CloseStatus(err)})
			continue
		}
		s := string(b)
		got = append(got, reply{Reply: &s})
	}
	checkReplies(t, e, "coder/websocket", got)
}

// TestWireFidelityNodeWS sends the same frames from the ws package, a
// WebSocket client berth did not write (testdata/wsclient, installed by
// `npm ci` there, as .ci/run does).
func TestWireFidelityNodeWS(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: apt-get install nodejs npm")
	}
	dir := filepath.Join("testdata", "wsclient")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "ws", "package.json")); err != nil {
		t.Skip("the ws package is not installed: run npm ci in openenv/tbench2/testdata/wsclient")
	}
	e := newEnv(t, nil)
	frames := make([]string, len(wireFrames))
	for i, w := range wireFrames {
		frames[i] = w.frame
	}
	in, _ := json.Marshal(map[string]any{"url": "ws" + strings.TrimPrefix(e.url, "http") + "/ws", "frames": frames})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "replay.mjs")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("replay.mjs: %v\n%s", err, stderr.String())
	}
	var got []reply
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("replay.mjs printed %s: %v", out, err)
	}
	checkReplies(t, e, "ws (npm)", got)
}
