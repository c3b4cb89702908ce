package llamatest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/berth-sh/berth/internal/testing/qwen3test"
	"github.com/berth-sh/berth/session"
	"github.com/berth-sh/berth/session/engine"
	"github.com/berth-sh/berth/session/tito"
)

// Stack is a session server (Qwen3's codec, SGLang dialect) in front of
// a running engine, both on loopback, with a recorder between them.
type Stack struct {
	Engine *Engine
	Codec  *tito.Codec
	Server *session.Server
	// URL is the session server's; Client drives its control routes.
	URL    string
	Client *session.Client

	mu    sync.Mutex
	turns map[string][]Turn
}

// Turn is one engine call as the recorder saw it.
type Turn struct {
	PromptIDs []int
	Reply
}

// NewStack starts an engine with o and a session server in front of it.
func NewStack(t testing.TB, o Options) *Stack {
	t.Helper()
	c := qwen3test.Codec(t)
	e := Start(t, o)
	st := &Stack{Engine: e, Codec: c, turns: map[string][]Turn{}}
	rec := httptest.NewServer(http.HandlerFunc(st.record))
	t.Cleanup(rec.Close)
	eng, err := engine.New(rec.URL, engine.SGLang, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := session.New(session.Options{Engine: eng, Codec: c})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { ts.Close(); srv.Close() })
	st.Server, st.URL, st.Client = srv, ts.URL, &session.Client{BaseURL: ts.URL}
	return st
}

// Turns are the engine calls of a session (its routing key), in order.
func (s *Stack) Turns(session string) []Turn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.turns[session])
}

// record relays a request to the engine and keeps, per routing key, the
// prompt and the reply of every chat turn that succeeded.
func (s *Stack) record(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req, _ := http.NewRequestWithContext(r.Context(), r.Method, s.Engine.URL+r.URL.Path, bytes.NewReader(body))
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	var in struct {
		InputIDs []int `json:"input_ids"`
	}
	if rep, err := ParseReply(out); err == nil && resp.StatusCode == http.StatusOK && json.Unmarshal(body, &in) == nil {
		key := r.Header.Get(engine.RoutingHeader)
		s.mu.Lock()
		s.turns[key] = append(s.turns[key], Turn{PromptIDs: in.InputIDs, Reply: rep})
		s.mu.Unlock()
	}
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	w.Write(out)
}

// Reply is what a chat turn answered, in SGLang's dialect.
type Reply struct {
	Content      string
	FinishReason string
	OutputIDs    []int
	LogProbs     []float64
	CachedTokens int
	PromptTokens int
}

// Chat sends one chat turn to session id, as an OpenAI client would, with
// the request's other fields (max_tokens, seed, temperature) from extra.
func (s *Stack) Chat(t testing.TB, id string, msgs []Message, extra map[string]any) Reply {
	t.Helper()
	body := map[string]any{"model": "tiny-qwen3", "messages": msgs}
	for k, v := range extra {
		body[k] = v
	}
	data, _ := json.Marshal(body)
	resp, err := http.Post(s.Client.SessionURL(id)+"/v1/chat/completions", "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("chat turn: %d %s", resp.StatusCode, out)
	}
	rep, err := ParseReply(out)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// ParseReply reads an SGLang chat completion.
func ParseReply(body []byte) (Reply, error) {
	var r struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
			MetaInfo     struct {
				OutputTokenLogprobs [][]json.RawMessage `json:"output_token_logprobs"`
				CachedTokens        int                 `json:"cached_tokens"`
				PromptTokens        int                 `json:"prompt_tokens"`
				CompletionTokens    int                 `json:"completion_tokens"`
			} `json:"meta_info"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &r); err != nil || len(r.Choices) != 1 {
		return Reply{}, fmt.Errorf("not a chat completion with one choice: %v: %.300s", err, body)
	}
	c := r.Choices[0]
	rep := Reply{Content: c.Message.Content, FinishReason: c.FinishReason, CachedTokens: c.MetaInfo.CachedTokens, PromptTokens: c.MetaInfo.PromptTokens}
	for i, e := range c.MetaInfo.OutputTokenLogprobs {
		var lp float64
		var id int
		var text string
		if len(e) != 3 || json.Unmarshal(e[0], &lp) != nil || json.Unmarshal(e[1], &id) != nil || json.Unmarshal(e[2], &text) != nil {
			return Reply{}, fmt.Errorf("output_token_logprobs[%d] is not [logprob, id, text]: %s", i, e)
		}
		rep.OutputIDs, rep.LogProbs = append(rep.OutputIDs, id), append(rep.LogProbs, lp)
	}
	if len(rep.OutputIDs) != c.MetaInfo.CompletionTokens {
		return Reply{}, fmt.Errorf("%d output_token_logprobs for completion_tokens %d", len(rep.OutputIDs), c.MetaInfo.CompletionTokens)
	}
	return rep, nil
}

// Message is a chat message.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// CheckSample checks a sample (its tokens, and the loss mask and logprobs
// of its response, the tail of the tokens) against the engine calls of its
// session: the tokens start with a turn's prompt and go on with its output
// for every turn they hold; the mask is 1 exactly on those outputs, with
// the engine's logprobs there and 0 elsewhere.
func CheckSample(t testing.TB, turns []Turn, tokens, mask []int, logprobs []float64) {
	t.Helper()
	model := map[int]float64{} // position -> the engine's logprob
	for i, tr := range turns {
		end := len(tr.PromptIDs) + len(tr.OutputIDs)
		if end > len(tokens) || !slices.Equal(tokens[:len(tr.PromptIDs)], tr.PromptIDs) {
			continue // a turn past where the sample stops (merging stops at a cut turn)
		}
		if !slices.Equal(tokens[len(tr.PromptIDs):end], tr.OutputIDs) {
			t.Fatalf("turn %d's output does not follow its prompt in the sample", i+1)
		}
		for j, lp := range tr.LogProbs {
			model[len(tr.PromptIDs)+j] = lp
		}
	}
	if len(mask) != len(logprobs) || len(mask) > len(tokens) || len(model) == 0 {
		t.Fatalf("%d tokens, %d mask, %d logprobs, %d model tokens", len(tokens), len(mask), len(logprobs), len(model))
	}
	start := len(tokens) - len(mask)
	for i := start; i < len(tokens); i++ {
		lp, ok := model[i]
		if (mask[i-start] == 1) != ok || logprobs[i-start] != lp {
			t.Fatalf("token %d: mask %d logprob %v; the engine's: %v %v", i, mask[i-start], logprobs[i-start], ok, lp)
		}
	}
	if len(model) > len(mask) {
		t.Fatalf("%d model tokens outside the response", len(model)-len(mask))
	}
}
