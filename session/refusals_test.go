package session

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/berth-sh/berth/session/engine"
	"github.com/berth-sh/berth/session/testengine"
	"github.com/berth-sh/berth/session/tito"
)

func errorOf(t *testing.T, body []byte) string {
	t.Helper()
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error == "" {
		t.Fatalf("not an {\"error\": msg} body: %s", body)
	}
	return e.Error
}

// TestRewriteMoreThanOneTurnBackIs400: a request that changes history two
// assistant turns back is refused and the session is left as it was; one
// turn back is a retry.
func TestRewriteMoreThanOneTurnBackIs400(t *testing.T) {
	e := newEnv(t, agentScript(func(testengine.Call) string { return "rw" }), testengine.Options{}, nil)
	id := e.create()
	conv := e.run(id, "rw", 3, func(int) bool { return false }, func(int) bool { return false })
	before, _ := e.client.Get(t.Context(), id)

	// Change the first assistant message (two generated turns back).
	msgs := slices.Clone(conv.msgs)
	first := -1
	for i, m := range msgs {
		if m.(map[string]any)["role"] == "assistant" {
			first = i
			break
		}
	}
	edited := map[string]any{}
	for k, v := range msgs[first].(map[string]any) {
		edited[k] = v
	}
	edited["content"] = "I changed my mind."
	msgs[first] = edited
	status, body := e.post("/sessions/"+id+"/v1/chat/completions", map[string]any{"messages": msgs, "tools": agentTools})
	if status != http.StatusBadRequest || !strings.Contains(errorOf(t, body), "history") {
		t.Fatalf("rewrite two turns back: %d %s", status, body)
	}
	after, _ := e.client.Get(t.Context(), id)
	if len(after.Records) != len(before.Records) || !slices.Equal(after.Metadata.AccumulatedTokenIDs, before.Metadata.AccumulatedTokenIDs) {
		t.Error("a refused request changed the session")
	}

	// Other malformed requests are 400 too.
	for name, body := range map[string]any{
		"no messages":    map[string]any{"messages": []any{}},
		"bad role":       map[string]any{"messages": []any{map[string]any{"role": "wizard", "content": "x"}}},
		"image part":     map[string]any{"messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "image_url"}}}}},
		"kwarg conflict": map[string]any{"messages": conv.msgs, "chat_template_kwargs": map[string]any{"clear_thinking": true}},
		"reserved kwarg": map[string]any{"messages": conv.msgs, "chat_template_kwargs": map[string]any{"messages": 1}},
		"tools":          map[string]any{"messages": conv.msgs, "tools": "nope"},
	} {
		if status, out := e.post("/sessions/"+id+"/v1/chat/completions", body); status != http.StatusBadRequest {
			t.Errorf("%s: %d %s", name, status, out)
		}
	}
	if status, _ := e.post("/sessions/"+id+"/v1/chat/completions", "not an object"); status != http.StatusBadRequest {
		t.Errorf("a JSON string body: %d", status)
	}
}

// TestBrokenPrefixIs500WithPosition: an engine that saw other ids than the
// session's (here a vLLM-style engine whose own rendering differs at one
// position) breaks the prefix invariant; the turn is refused with 500 and
// the first differing position, and nothing is recorded.
func TestBrokenPrefixIs500WithPosition(t *testing.T) {
	const broken = 7
	var e *testEnv
	render := func(body map[string]json.RawMessage) ([]int, error) {
		var m struct {
			Messages []json.RawMessage `json:"messages"`
		}
		json.Unmarshal(mustJSON(body), &m)
		ids := e.codec.Tok // the engine renders the conversation itself
		text, err := renderBody(e, body)
		if err != nil {
			return nil, err
		}
		out, err := ids.Encode(text)
		if err != nil {
			return nil, err
		}
		if len(m.Messages) > 2 { // from the second turn on, one token differs
			out[broken] = out[broken] + 1
		}
		return out, nil
	}
	e = newEnv(t, agentScript(func(testengine.Call) string { return "bp" }), testengine.Options{Dialect: engine.VLLM, Render: render}, nil)
	id := e.create()
	msgs := []any{map[string]any{"role": "user", "content": "hello"}}
	asst := e.chat(id, msgs, nil, false)
	msgs = append(msgs, asst)
	msgs = append(msgs, toolResults("bp", 1, asst)...)
	status, body := e.post("/sessions/"+id+"/v1/chat/completions", map[string]any{"messages": msgs})
	if status != http.StatusInternalServerError {
		t.Fatalf("broken prefix: %d %s", status, body)
	}
	var reply struct {
		Error         string `json:"error"`
		FirstMismatch int    `json:"first_mismatch"`
	}
	json.Unmarshal(body, &reply)
	if reply.FirstMismatch != broken || !strings.Contains(reply.Error, "first mismatch at index 7") {
		t.Errorf("reply %+v, want position %d", reply, broken)
	}
	info, _ := e.client.Get(t.Context(), id)
	if len(info.Records) != 1 {
		t.Errorf("%d records after a refused commit, want 1", len(info.Records))
	}
}

// renderBody renders a request's messages and tools with the session's
// codec, as an engine that applies the chat template itself would.
func renderBody(e *testEnv, body map[string]json.RawMessage) (string, error) {
	t, err := (&Server{opts: Options{Codec: e.codec, MaxMessages: 1 << 20}}).parseTurn(map[string]json.RawMessage{"messages": body["messages"], "tools": body["tools"]})
	if err != nil {
		return "", err
	}
	var empty tito.Trajectory
	msgs, err := empty.ParseRequest(t.raw, tito.Strict)
	if err != nil {
		return "", err
	}
	return e.codec.Render(msgs, t.tools, true, t.kwargs)
}

// TestUnknownSessionIs404 on every session route.
func TestUnknownSessionIs404(t *testing.T) {
	e := newEnv(t, agentScript(func(testengine.Call) string { return "x" }), testengine.Options{}, nil)
	for _, r := range []struct{ method, path string }{
		{"POST", "/sessions/nope/v1/chat/completions"}, {"POST", "/sessions/nope/v1/messages"},
		{"GET", "/sessions/nope"}, {"DELETE", "/sessions/nope"}, {"POST", "/sessions/nope/samples"},
		{"GET", "/sessions/nope/v1/models"},
	} {
		req, _ := http.NewRequest(r.method, e.url+r.path, strings.NewReader(`{"messages":[{"role":"user","content":"x"}]}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body [512]byte
		n, _ := resp.Body.Read(body[:])
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(errorOf(t, body[:n]), "session not found") {
			t.Errorf("%s %s: %d %s", r.method, r.path, resp.StatusCode, body[:n])
		}
	}
	// A deleted session is gone.
	id := e.create()
	if err := e.client.Delete(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Get(t.Context(), id); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("get after delete: %v", err)
	}
}

// TestUpstreamErrorPassesThroughUnrecorded: an engine reply other than 200
// reaches the client as it was and leaves no record; the session goes on.
func TestUpstreamErrorPassesThroughUnrecorded(t *testing.T) {
	const engineErr = `{"object":"error","message":"This model's maximum context length is 32768 tokens.","code":400}`
	script := func(c testengine.Call) testengine.Reply {
		if c.N == 2 {
			return testengine.Reply{Status: http.StatusBadRequest, ErrorBody: engineErr}
		}
		return testengine.Reply{Text: "fine"}
	}
	e := newEnv(t, script, testengine.Options{}, nil)
	id := e.create()
	msgs := []any{map[string]any{"role": "user", "content": "one"}}
	msgs = append(msgs, e.chat(id, msgs, nil, false), map[string]any{"role": "user", "content": "two"})
	status, body := e.post("/sessions/"+id+"/v1/chat/completions", map[string]any{"messages": msgs})
	if status != http.StatusBadRequest || string(body) != engineErr {
		t.Fatalf("passthrough: %d %q", status, body)
	}
	info, _ := e.client.Get(t.Context(), id)
	if len(info.Records) != 1 {
		t.Errorf("%d records after an upstream error, want 1", len(info.Records))
	}
	msgs = append(msgs, e.chat(id, msgs, nil, false))
	if info, _ = e.client.Get(t.Context(), id); len(info.Records) != 2 || info.Metadata.MismatchCounts["non_assistant_text"] != 0 {
		t.Errorf("after the retry: %d records, counts %v", len(info.Records), info.Metadata.MismatchCounts)
	}

	// An engine that cannot be reached is a 502 with the error shape.
	dead := newEnv(t, script, testengine.Options{}, nil)
	deadID := dead.create()
	dead.srv.opts.Engine, _ = engine.New("http://127.0.0.1:1", engine.SGLang, engine.Options{})
	status, body = dead.post("/sessions/"+deadID+"/v1/chat/completions", map[string]any{"messages": msgs[:1]})
	if status != http.StatusBadGateway || !strings.Contains(errorOf(t, body), "engine transport") {
		t.Errorf("unreachable engine: %d %s", status, body)
	}
}
