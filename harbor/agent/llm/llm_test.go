package llm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

const secret = "sk-SECRET-llm-4f1c"

// endpoint answers each call with the next of replies (status, body) and
// records what it got.
type endpoint struct {
	replies []reply
	n       atomic.Int32
	auth    atomic.Value
	body    atomic.Value
	path    atomic.Value
}

type reply struct {
	status int
	body   string
	header map[string]string
}

func (e *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i := int(e.n.Add(1)) - 1
	b, _ := io.ReadAll(r.Body)
	e.body.Store(string(b))
	e.auth.Store(r.Header.Get("Authorization"))
	e.path.Store(r.URL.Path)
	rep := e.replies[min(i, len(e.replies)-1)]
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rep.status)
	io.WriteString(w, rep.body)
}

const okBody = `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,
"message":{"role":"assistant","content":"hello","reasoning_content":"thought"},"finish_reason":"stop",
"meta_info":{"cached_tokens":7}}],"usage":{"prompt_tokens":11,"completion_tokens":3,"total_tokens":14}}`

func client(t *testing.T, e *endpoint, base string) (*Client, *httptest.Server) {
	t.Helper()
	ts := httptest.NewServer(e)
	t.Cleanup(ts.Close)
	c, err := New(Options{BaseURL: ts.URL + base, APIKey: secret, Model: "m", MaxRetryDelay: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c, ts
}

func TestRetriesThrottlesAndServerErrors(t *testing.T) {
	// The process environment must not leak into a call: a session server
	// would otherwise get the user's own OpenAI key.
	t.Setenv("OPENAI_API_KEY", "sk-FROM-ENV")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	e := &endpoint{replies: []reply{
		{status: 429, body: `{"error":{"message":"slow down"}}`, header: map[string]string{"Retry-After": "0"}},
		{status: 500, body: `{"object":"error","message":"engine hiccup","code":500}`},
		{status: 200, body: okBody},
	}}
	c, _ := client(t, e, "/sessions/abc")
	temp := 0.5
	rep, err := c.Chat(t.Context(), Request{Messages: []Message{{Role: "system", Content: "s"}, {Role: "user", Content: "u"}}, MaxTokens: 99, Temperature: &temp})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Attempts != 3 || rep.Content != "hello" || rep.ReasoningContent != "thought" || rep.FinishReason != "stop" {
		t.Fatalf("reply %+v", rep)
	}
	if rep.Usage != (Usage{PromptTokens: 11, CompletionTokens: 3, CachedTokens: 7}) {
		t.Fatalf("usage %+v", rep.Usage)
	}
	if got := e.path.Load(); got != "/sessions/abc/v1/chat/completions" {
		t.Fatalf("path %v", got)
	}
	if got := e.auth.Load(); got != "Bearer "+secret {
		t.Fatalf("authorization %q", got)
	}
	var body map[string]any
	json.Unmarshal([]byte(e.body.Load().(string)), &body)
	if body["max_tokens"] != float64(99) || body["model"] != "m" || body["temperature"] != 0.5 {
		t.Fatalf("request body %v", body)
	}
}

func TestBaseURLEndingInV1(t *testing.T) {
	e := &endpoint{replies: []reply{{status: 200, body: okBody}}}
	c, _ := client(t, e, "/v1")
	if _, err := c.Chat(t.Context(), Request{Messages: []Message{{Role: "user", Content: "u"}}}); err != nil {
		t.Fatal(err)
	}
	if got := e.path.Load(); got != "/v1/chat/completions" {
		t.Fatalf("path %v", got)
	}
}

func TestFailuresAreClassed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rep     reply
		class   errdefs.Class
		context bool
		calls   int
	}{
		{"throttled to the end", reply{status: 429, body: `{"error":{"message":"rate limit"}}`, header: map[string]string{"Retry-After": "0"}}, errdefs.ResourceExhausted, false, 5},
		{"server error to the end", reply{status: 503, body: `upstream down`}, errdefs.Unavailable, false, 5},
		{"bad key", reply{status: 401, body: `{"error":{"message":"invalid key ` + secret + `"}}`}, errdefs.Unauthenticated, false, 1},
		{"vllm context", reply{status: 400, body: `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens","code":400}`}, errdefs.InvalidArgument, true, 1},
		{"sglang context", reply{status: 400, body: `{"object":"error","message":"The input (5000 tokens) is longer than the model's context length (4096 tokens).","code":400}`}, errdefs.InvalidArgument, true, 1},
		{"openai context", reply{status: 400, body: `{"error":{"message":"too long","code":"context_length_exceeded"}}`}, errdefs.InvalidArgument, true, 1},
		{"other refusal", reply{status: 400, body: `{"error":{"message":"messages must alternate"}}`}, errdefs.InvalidArgument, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &endpoint{replies: []reply{tc.rep}}
			c, ts := client(t, e, "")
			_, err := c.Chat(t.Context(), Request{Messages: []Message{{Role: "user", Content: "u"}}})
			if err == nil {
				t.Fatal("no error")
			}
			if got := errdefs.ClassOf(err); got != tc.class {
				t.Fatalf("class %v, want %v: %v", got, tc.class, err)
			}
			if errors.Is(err, ErrContextLength) != tc.context {
				t.Fatalf("context length %v: %v", !tc.context, err)
			}
			if int(e.n.Load()) != tc.calls {
				t.Fatalf("%d calls, want %d", e.n.Load(), tc.calls)
			}
			for _, s := range []string{secret, ts.URL} {
				if strings.Contains(err.Error(), s) || strings.Contains(fmt.Sprintf("%+v %#v", err, err), s) {
					t.Fatalf("error shows %q: %v", s, err)
				}
			}
		})
	}
}

func TestUnreachable(t *testing.T) {
	ts := httptest.NewServer(http.NotFoundHandler())
	url := ts.URL
	ts.Close()
	c, err := New(Options{BaseURL: url, APIKey: secret, MaxRetries: 1, MaxRetryDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Chat(t.Context(), Request{Messages: []Message{{Role: "user", Content: "u"}}})
	if errdefs.ClassOf(err) != errdefs.Unavailable || strings.Contains(err.Error(), url) {
		t.Fatalf("unreachable: %v", err)
	}
}

func TestRefusedEndpoints(t *testing.T) {
	for _, u := range []string{"ftp://x", "not a url", "https://user:" + secret + "@api.example/v1"} {
		_, err := New(Options{BaseURL: u})
		if errdefs.ClassOf(err) != errdefs.InvalidArgument || strings.Contains(err.Error(), secret) {
			t.Fatalf("%q: %v", u, err)
		}
	}
}
