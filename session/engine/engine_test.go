package engine

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
)

// An engine that answers every chat call with a fixed body, and records
// what it was sent.
func fixed(t *testing.T, status int, body string) (*HTTP, *map[string]json.RawMessage, *http.Header) {
	t.Helper()
	var got map[string]json.RawMessage
	var hdr http.Header
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		json.Unmarshal(data, &got)
		hdr = r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(ts.Close)
	e, err := New(ts.URL, SGLang, Options{APIKey: "engine-secret"})
	if err != nil {
		t.Fatal(err)
	}
	return e, &got, &hdr
}

const okReply = `{"id":"x","choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop",
 "meta_info":{"output_token_logprobs":[[-0.5,7,"hi"],[null,2,"</s>"]],"completion_tokens":2,"prompt_tokens":3,"cached_tokens":1,"weight_version":3}}]}`

func TestSGLangRequestAndReply(t *testing.T) {
	e, sent, hdr := fixed(t, 200, okReply)
	c, err := e.Chat(t.Context(), &Request{Body: map[string]json.RawMessage{"model": []byte(`"m"`), "input_ids": []byte(`[9]`), "logprobs": []byte("false")},
		PromptIDs: []int{1, 2, 3}, RoutingKey: "sess"})
	if err != nil {
		t.Fatal(err)
	}
	s := *sent
	if string(s["input_ids"]) != "[1,2,3]" || string(s["logprobs"]) != "true" || string(s["return_meta_info"]) != "true" || string(s["no_stop_trim"]) != "false" {
		t.Errorf("forced fields: %v", s)
	}
	if hdr.Get(RoutingHeader) != "sess" || hdr.Get("Authorization") != "Bearer engine-secret" {
		t.Errorf("headers %v", hdr)
	}
	if !slices.Equal(c.OutputIDs, []int{7, 2}) || !slices.Equal(c.LogProbs, []float64{-0.5, 0}) || c.FinishReason != "stop" ||
		c.Meta.CachedTokens != 1 || c.Meta.WeightVersion != "3" {
		t.Errorf("parsed %+v", c)
	}
}

func TestMalformedRepliesAreUpstreamErrors(t *testing.T) {
	for name, body := range map[string]string{
		"not json":       `<html>`,
		"no choices":     `{"choices":[]}`,
		"null content":   `{"choices":[{"message":{"role":"assistant","content":null},"meta_info":{"output_token_logprobs":[],"completion_tokens":0}}]}`,
		"no meta_info":   `{"choices":[{"message":{"role":"assistant","content":"x"}}]}`,
		"length differs": `{"choices":[{"message":{"role":"assistant","content":"x"},"meta_info":{"output_token_logprobs":[[-1,5,"x"]],"completion_tokens":2}}]}`,
		"no token id":    `{"choices":[{"message":{"role":"assistant","content":"x"},"meta_info":{"output_token_logprobs":[[-1]],"completion_tokens":1}}]}`,
	} {
		e, _, _ := fixed(t, 200, body)
		if _, err := e.Chat(t.Context(), &Request{PromptIDs: []int{1}}); !errors.Is(err, ErrUpstream) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Not 200: returned as it came, for the server to pass through.
	e, _, _ := fixed(t, 429, `{"error":"busy"}`)
	c, err := e.Chat(t.Context(), &Request{PromptIDs: []int{1}})
	if err != nil || c.Status != 429 || string(c.Body) != `{"error":"busy"}` {
		t.Errorf("429: %v %+v", err, c)
	}
}

func TestNewRefusesBadURLs(t *testing.T) {
	for _, u := range []string{"ftp://x", "http://", "http://user:pw@host:1", "::"} {
		if _, err := New(u, SGLang, Options{}); err == nil {
			t.Errorf("%q accepted", u)
		}
	}
	if _, err := ParseDialect("tgi"); err == nil {
		t.Error("unknown dialect accepted")
	}
	// The engine's key never shows in a transport error.
	e, _ := New("http://127.0.0.1:1", SGLang, Options{APIKey: "engine-secret"})
	if _, err := e.Chat(t.Context(), &Request{}); err == nil || strings.Contains(err.Error(), "engine-secret") {
		t.Errorf("transport error %v", err)
	}
}

// pathEngine is an engine that records the request target of every call
// it gets (as sent on the wire) and answers 200.
func pathEngine(t *testing.T) (baseURL string, seen func() []string) {
	t.Helper()
	var mu sync.Mutex
	var got []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.RequestURI)
		mu.Unlock()
		io.WriteString(w, `{}`)
	}))
	t.Cleanup(ts.Close)
	return ts.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// TestForwardStaysUnderBasePath: with the engine at .../prefix/, a relayed
// path that decodes to a dot segment, an empty segment, a slash or a
// backslash inside a segment is refused (ErrBadPath) and never sent. On
// 5553f78 Forward joined whatever it was given to the base, and the
// session server gave it the path decoded: the engine got
// /prefix/../admin (the server's TestAttackRelayPathLeavesPrefix). Plain
// paths reach the engine under the prefix, their escapes kept.
func TestForwardStaysUnderBasePath(t *testing.T) {
	base, seen := pathEngine(t)
	e, err := New(base+"/prefix/", OpenAI, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"%2e%2e/admin", "..%2fadmin", "%2E%2E%5Cadmin", "v1/%2e%2e/%2e%2e/admin", ".%2E/admin", "..", "v1/./models",
		"v1//models", "a%2Fb", `a\b`, "..;/admin", "%2e%2e;x/admin", "%zz"} {
		if _, err := e.Forward(t.Context(), http.MethodGet, p, "", nil, nil, "k"); !errors.Is(err, ErrBadPath) {
			t.Errorf("%q: %v, want ErrBadPath", p, err)
		}
	}
	if got := seen(); len(got) != 0 {
		t.Fatalf("the engine got refused paths: %q", got)
	}
	for _, p := range []string{"v1/models", "v1/models/", "v1/a%20b", "health"} {
		if c, err := e.Forward(t.Context(), http.MethodGet, p, "x=1", nil, nil, "k"); err != nil || c.Status != http.StatusOK {
			t.Errorf("%q: %v", p, err)
		}
	}
	want := []string{"/prefix/v1/models?x=1", "/prefix/v1/models/?x=1", "/prefix/v1/a%20b?x=1", "/prefix/health?x=1"}
	if got := seen(); !slices.Equal(got, want) {
		t.Errorf("the engine got %q, want %q", got, want)
	}
}
