package session

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/apikeys"
	"github.com/berth-sh/berth/session/engine"
	"github.com/berth-sh/berth/session/testengine"
)

// TestAnthropicMessages: a Messages API client (claude-code's shape) runs
// tool-use turns, one of them streamed; its replayed tool_use inputs are
// re-serialized JSON, which the route matches as the same history.
func TestAnthropicMessages(t *testing.T) {
	e := newEnv(t, agentScript(func(testengine.Call) string { return "an" }), testengine.Options{}, nil)
	id := e.create()
	tools := []any{map[string]any{"name": "bash", "description": "Run a command.",
		"input_schema": map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}}}}
	msgs := []any{map[string]any{"role": "user", "content": "Investigate."}}
	for turn := 1; turn <= 4; turn++ {
		body := map[string]any{"model": "m", "max_tokens": 4096, "system": []any{map[string]any{"type": "text", "text": "Be careful."}},
			"messages": msgs, "tools": tools, "stream": turn == 3}
		status, out := e.post("/sessions/"+id+"/v1/messages", body)
		if status != http.StatusOK {
			t.Fatalf("turn %d: %d %s", turn, status, out)
		}
		var reply struct {
			Type       string           `json:"type"`
			Role       string           `json:"role"`
			Content    []map[string]any `json:"content"`
			StopReason string           `json:"stop_reason"`
		}
		if turn == 3 {
			reply.Content, reply.StopReason = anthropicStream(t, out)
			reply.Type, reply.Role = "message", "assistant"
		} else if err := json.Unmarshal(out, &reply); err != nil {
			t.Fatal(err)
		}
		if reply.Type != "message" || reply.Role != "assistant" || len(reply.Content) == 0 {
			t.Fatalf("turn %d: reply %s", turn, out)
		}
		// Replay as a client does: the content blocks, tool inputs as
		// objects (their JSON spelling is the client's own).
		msgs = append(msgs, map[string]any{"role": "assistant", "content": reply.Content})
		var results []any
		for _, b := range reply.Content {
			if b["type"] == "tool_use" {
				if reply.StopReason != "tool_use" {
					t.Errorf("stop_reason %q with a tool_use block", reply.StopReason)
				}
				results = append(results, map[string]any{"type": "tool_result", "tool_use_id": b["id"], "content": "ok " + b["id"].(string)})
			}
		}
		if len(results) == 0 {
			results = []any{map[string]any{"type": "text", "text": "continue"}}
		}
		msgs = append(msgs, map[string]any{"role": "user", "content": results})
	}
	info, err := e.client.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Records) != 4 {
		t.Errorf("%d records, want 4 (no turn rolled back)", len(info.Records))
	}
	for _, typ := range []string{"special_token_count", "special_token_type", "non_assistant_text"} {
		if info.Metadata.MismatchCounts[typ] != 0 {
			t.Errorf("%s = %d", typ, info.Metadata.MismatchCounts[typ])
		}
	}
}

// anthropicStream reads the Messages SSE events back into blocks.
func anthropicStream(t *testing.T, sse []byte) ([]map[string]any, string) {
	t.Helper()
	var blocks []map[string]any
	stop := ""
	var events []string
	sc := bufio.NewScanner(bytes.NewReader(sse))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "event: ") {
			events = append(events, strings.TrimPrefix(line, "event: "))
			continue
		}
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		var ev map[string]any
		json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev)
		switch ev["type"] {
		case "content_block_start":
			blocks = append(blocks, ev["content_block"].(map[string]any))
		case "content_block_delta":
			b, d := blocks[len(blocks)-1], ev["delta"].(map[string]any)
			switch d["type"] {
			case "text_delta":
				b["text"] = b["text"].(string) + d["text"].(string)
			case "input_json_delta":
				var in map[string]any
				json.Unmarshal([]byte(d["partial_json"].(string)), &in)
				b["input"] = in
			}
		case "message_delta":
			stop = ev["delta"].(map[string]any)["stop_reason"].(string)
		}
	}
	if len(events) < 3 || events[0] != "message_start" || events[len(events)-1] != "message_stop" {
		t.Fatalf("events %v", events)
	}
	return blocks, stop
}

// TestOtherDialects: a vLLM-style engine (renders itself, reports prompt
// and output ids) and a text-only OpenAI server (ids re-tokenized here,
// counted) both record turns whose ids are the transcript.
func TestOtherDialects(t *testing.T) {
	for _, d := range []engine.Dialect{engine.VLLM, engine.OpenAI} {
		t.Run(d.String(), func(t *testing.T) {
			var e *testEnv
			render := func(body map[string]json.RawMessage) ([]int, error) {
				text, err := renderBody(e, body)
				if err != nil {
					return nil, err
				}
				return e.codec.Tok.Encode(text)
			}
			e = newEnv(t, agentScript(func(testengine.Call) string { return "dl" }), testengine.Options{Dialect: d, Render: render}, nil)
			id := e.create()
			conv := e.run(id, "dl", 6, func(turn int) bool { return turn == 2 }, func(int) bool { return false })
			info, _ := e.client.Get(t.Context(), id)
			want := transcriptIDs(t, e.codec, conv.msgs)
			nl, _ := e.codec.Tok.Encode("\n")
			exact := slices.Equal(want, append(slices.Clone(info.Metadata.AccumulatedTokenIDs), nl...))
			if d == engine.VLLM && !exact {
				t.Errorf("ids differ from the transcript at %d", firstDiff(want, info.Metadata.AccumulatedTokenIDs))
			}
			// Text-only replies are re-tokenized as the template renders a
			// final turn (Qwen3 adds an empty think block): assistant text
			// may drift, nothing else may.
			for _, typ := range []string{"special_token_count", "special_token_type", "non_assistant_text"} {
				if n := info.Metadata.MismatchCounts[typ]; n != 0 {
					t.Errorf("%s = %d", typ, n)
				}
			}
			metrics := e.metricsText(t)
			retok := "berth_session_retokenized_turns_total 6"
			if d == engine.VLLM {
				retok = "berth_session_retokenized_turns_total 0"
			}
			if !strings.Contains(metrics, retok) {
				t.Errorf("want %q in metrics", retok)
			}
		})
	}
}

func (e *testEnv) metricsText(t testing.TB) string {
	resp, err := http.Get(e.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestMetricsCounters: the mismatch counters exist from the start and are
// counted when samples are collected.
func TestMetricsCounters(t *testing.T) {
	e := newEnv(t, agentScript(func(testengine.Call) string { return "mc" }), testengine.Options{}, nil)
	for _, typ := range []string{"special_token_count", "special_token_type", "non_assistant_text"} {
		if !strings.Contains(e.metricsText(t), `berth_session_tito_mismatches_total{type="`+typ+`"} 0`) {
			t.Errorf("%s is not exported at 0", typ)
		}
	}
	id := e.create()
	e.run(id, "mc", 3, func(int) bool { return false }, func(turn int) bool { return turn == 2 })
	if _, err := e.client.Samples(t.Context(), id, 0); err != nil {
		t.Fatal(err)
	}
	m := e.metricsText(t)
	for _, want := range []string{"berth_session_tito_checked_total 1", `berth_session_turns_total{outcome="committed"} 4`,
		"berth_session_rollbacks_total 1", "berth_session_sessions 1"} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// TestAuthAndBounds: keys when configured, and the limits on bodies,
// messages and sessions.
func TestAuthAndBounds(t *testing.T) {
	keys, _ := apikeys.New("berth_0123456789abcdef0123")
	e := newEnv(t, agentScript(func(testengine.Call) string { return "ab" }), testengine.Options{}, func(o *Options) {
		o.Keys, o.MaxBodyBytes, o.MaxMessages, o.MaxSessions = keys, 64<<10, 8, 2
	})
	if status, _ := e.post("/sessions", nil); status != http.StatusUnauthorized {
		t.Errorf("no key: %d", status)
	}
	if status, _ := e.post("/sessions", nil, "Authorization", "Bearer wrong-key-0000000000"); status != http.StatusUnauthorized {
		t.Errorf("wrong key: %d", status)
	}
	if resp, err := http.Get(e.url + "/health"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("health needs no key: %v", err)
	}
	e.client.APIKey = "berth_0123456789abcdef0123"
	id := e.create()
	status, _ := e.post("/sessions/"+id+"/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}},
		"x-api-key", "berth_0123456789abcdef0123")
	if status != http.StatusOK {
		t.Errorf("x-api-key: %d", status)
	}
	key := []string{"Authorization", "Bearer berth_0123456789abcdef0123"}
	big := map[string]any{"messages": []any{map[string]any{"role": "user", "content": strings.Repeat("x", 70<<10)}}}
	if status, _ := e.post("/sessions/"+id+"/v1/chat/completions", big, key...); status != http.StatusRequestEntityTooLarge {
		t.Errorf("big body: %d", status)
	}
	many := make([]any, 9)
	for i := range many {
		many[i] = map[string]any{"role": "user", "content": "x"}
	}
	if status, _ := e.post("/sessions/"+id+"/v1/chat/completions", map[string]any{"messages": many}, key...); status != http.StatusBadRequest {
		t.Errorf("too many messages: %d", status)
	}
	e.create()
	if status, _ := e.post("/sessions", nil, key...); status != http.StatusTooManyRequests {
		t.Errorf("third session: %d", status)
	}
}

// TestDeleteDuringTurn: a session deleted while its turn waits on the
// engine is gone afterwards, and the late reply is not committed.
func TestDeleteDuringTurn(t *testing.T) {
	release := make(chan struct{})
	script := func(c testengine.Call) testengine.Reply {
		<-release
		return testengine.Reply{Text: "late"}
	}
	e := newEnv(t, script, testengine.Options{}, nil)
	id := e.create()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		e.postT(goroutineTB{t}, "/sessions/"+id+"/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	}()
	for len(e.eng.Calls()) == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := e.client.Delete(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	close(release)
	wg.Wait()
	if !strings.Contains(e.metricsText(t), `berth_session_turns_total{outcome="skipped"} 1`) {
		t.Error("the late turn was not skipped")
	}
	if _, err := e.client.Get(t.Context(), id); err == nil {
		t.Error("the deleted session is still there")
	}
}

func TestIdleSessionsExpire(t *testing.T) {
	e := newEnv(t, agentScript(func(testengine.Call) string { return "ex" }), testengine.Options{}, func(o *Options) { o.IdleTimeout = 50 * time.Millisecond })
	id := e.create()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(150 * time.Millisecond) // longer than the timeout: a GET counts as use
		if _, err := e.client.Get(t.Context(), id); err != nil && strings.Contains(err.Error(), "404") {
			return
		}
	}
	t.Error("an idle session was not removed")
}

// TestProxyAndHealth: other paths under a session go to the engine with
// the routing header; /health names the instance.
func TestProxyAndHealth(t *testing.T) {
	e := newEnv(t, agentScript(func(testengine.Call) string { return "px" }), testengine.Options{}, func(o *Options) { o.InstanceID = "inst-1" })
	resp, err := http.Get(e.url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	var h map[string]string
	json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if h["status"] != "ok" || h["session_server_instance_id"] != "inst-1" {
		t.Errorf("health %v", h)
	}
	id := e.create()
	// The test engine serves only chat completions: its 404 for another
	// path must come back as it was.
	status, body := e.post("/sessions/"+id+"/v1/models", map[string]any{})
	if status != http.StatusNotFound || !strings.Contains(string(body), "testengine serves") {
		t.Errorf("proxied: %d %s", status, body)
	}
}
