package engine

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
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
