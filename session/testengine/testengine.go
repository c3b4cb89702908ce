package testengine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/berth-sh/berth/session/engine"
	"github.com/berth-sh/berth/tokenizer"
)

// Call is what the script sees of one request.
type Call struct {
	RoutingKey string
	// N counts the calls of this routing key, from 1.
	N        int
	InputIDs []int // SGLang dialect; the rendered prompt in the others
	Body     map[string]json.RawMessage
	// Ctx is the request's context: it ends when the caller hangs up (a
	// script that blocks on it sees a cancelled engine call).
	Ctx context.Context
}

// Reply is the scripted outcome of a call.
type Reply struct {
	// Text is the model's raw output, Qwen tool-call syntax included.
	Text string
	// FinishReason overrides the natural one ("tool_calls" when the text
	// has tool calls, else "stop"). "length" and "abort" end without the
	// end-of-turn token.
	FinishReason string
	// Status, when set and not 200, is returned with ErrorBody instead.
	Status    int
	ErrorBody string
	// ReasoningContent, when set, is returned as message.reasoning_content.
	ReasoningContent string
}

// Script decides each reply.
type Script func(Call) Reply

// Options configure New.
type Options struct {
	// EOS is the end-of-turn token (default "<|im_end|>").
	EOS string
	// Dialect is the API the engine speaks (default SGLang).
	Dialect engine.Dialect
	// Render computes prompt ids from a request body for the dialects in
	// which the engine renders messages itself (vLLM reports them).
	Render func(body map[string]json.RawMessage) ([]int, error)
}

// Engine is the test double. It is an http.Handler and safe for
// concurrent use.
type Engine struct {
	tok    *tokenizer.Tokenizer
	eos    int
	script Script
	opts   Options

	mu      sync.Mutex
	counts  map[string]int
	last    map[string][]int // previous prompt per key, for cached_tokens
	calls   []Call
	targets []string // every request's target, as sent
}

// New returns an engine that tokenizes with tok and replies from script.
func New(tok *tokenizer.Tokenizer, script Script, o Options) (*Engine, error) {
	if o.EOS == "" {
		o.EOS = "<|im_end|>"
	}
	eos, ok := tok.TokenID(o.EOS)
	if !ok {
		return nil, fmt.Errorf("testengine: the tokenizer has no %q token", o.EOS)
	}
	return &Engine{tok: tok, eos: eos, script: script, opts: o, counts: map[string]int{}, last: map[string][]int{}}, nil
}

// Calls returns the calls served so far.
func (e *Engine) Calls() []Call {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Call(nil), e.calls...)
}

// Targets returns the request target (path and query, as sent on the
// wire) of every request it got, whatever its path.
func (e *Engine) Targets() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.targets...)
}

func fail(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"object": "error", "message": msg, "code": status})
}

func (e *Engine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	e.targets = append(e.targets, r.RequestURI)
	e.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		fail(w, http.StatusNotFound, "testengine serves POST /v1/chat/completions only")
		return
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, 256<<20))
	if err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(data, &body); err != nil {
		fail(w, http.StatusBadRequest, "body is not a JSON object")
		return
	}
	prompt, err := e.prompt(body)
	if err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	key := r.Header.Get(engine.RoutingHeader)
	e.mu.Lock()
	e.counts[key]++
	call := Call{RoutingKey: key, N: e.counts[key], InputIDs: prompt, Body: body, Ctx: r.Context()}
	cached := commonPrefix(e.last[key], prompt)
	e.last[key] = prompt
	e.calls = append(e.calls, call)
	e.mu.Unlock()

	rep := e.script(call)
	if rep.Status != 0 && rep.Status != http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.Status)
		io.WriteString(w, rep.ErrorBody)
		return
	}
	out, err := e.reply(call, rep, cached)
	if err != nil {
		fail(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(out)
}

func (e *Engine) prompt(body map[string]json.RawMessage) ([]int, error) {
	if e.opts.Dialect != engine.SGLang {
		if e.opts.Render == nil {
			return nil, nil
		}
		return e.opts.Render(body)
	}
	if string(body["stream"]) == "true" {
		return nil, fmt.Errorf("stream is not supported with return_meta_info")
	}
	if string(body["logprobs"]) != "true" || string(body["return_meta_info"]) != "true" {
		return nil, fmt.Errorf("a session server must ask for logprobs and return_meta_info")
	}
	var ids []int
	if err := json.Unmarshal(body["input_ids"], &ids); err != nil || len(ids) == 0 {
		return nil, fmt.Errorf("input_ids missing")
	}
	return ids, nil
}

func commonPrefix(a, b []int) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// LogProb is the deterministic logprob of the j-th output token id.
func LogProb(id, j int) float64 { return -float64((id*7+j*13)%1000+1) / 1000 }

type toolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// parseToolCalls splits Qwen-style output into content and tool calls.
// Text that does not parse stays content, as engines do.
func parseToolCalls(text string, n int) (string, []toolCall) {
	i := strings.Index(text, "<tool_call>")
	if i < 0 {
		return text, nil
	}
	content := strings.TrimSuffix(text[:i], "\n")
	var calls []toolCall
	rest := text[i:]
	for k := 0; strings.HasPrefix(rest, "<tool_call>"); k++ {
		end := strings.Index(rest, "</tool_call>")
		if end < 0 {
			return text, nil
		}
		var tc struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal([]byte(strings.TrimSpace(rest[len("<tool_call>"):end])), &tc); err != nil || tc.Name == "" {
			return text, nil
		}
		c := toolCall{ID: fmt.Sprintf("call_%d_%d", n, k), Type: "function"}
		c.Function.Name, c.Function.Arguments = tc.Name, string(tc.Arguments)
		calls = append(calls, c)
		rest = strings.TrimPrefix(rest[end+len("</tool_call>"):], "\n")
	}
	if strings.TrimSpace(rest) != "" {
		return text, nil
	}
	return content, calls
}

func (e *Engine) reply(call Call, rep Reply, cached int) ([]byte, error) {
	ids, err := e.tok.Encode(rep.Text)
	if err != nil {
		return nil, err
	}
	content, calls := parseToolCalls(rep.Text, call.N)
	finish := rep.FinishReason
	if finish == "" {
		finish = "stop"
		if len(calls) > 0 {
			finish = "tool_calls"
		}
	}
	var max int
	if json.Unmarshal(call.Body["max_tokens"], &max) != nil || max <= 0 {
		json.Unmarshal(call.Body["max_completion_tokens"], &max)
	}
	if finish == "stop" || finish == "tool_calls" {
		ids = append(ids, e.eos)
	}
	if max > 0 && len(ids) > max {
		ids, finish = ids[:max], "length"
		text, _ := e.tok.Decode(ids, true)
		content, calls = text, nil
	}
	lps := make([]float64, len(ids))
	otl := make([][]any, len(ids))
	for j, id := range ids {
		lps[j] = LogProb(id, j)
		t, _ := e.tok.Decode([]int{id}, false)
		otl[j] = []any{lps[j], id, t}
	}
	msg := map[string]any{"role": "assistant", "content": content, "reasoning_content": nil}
	if rep.ReasoningContent != "" {
		msg["reasoning_content"] = rep.ReasoningContent
	}
	if len(calls) > 0 {
		msg["tool_calls"] = calls
	}
	model := "test"
	json.Unmarshal(call.Body["model"], &model)
	choice := map[string]any{"index": 0, "message": msg, "finish_reason": finish}
	resp := map[string]any{
		"id": fmt.Sprintf("chatcmpl-test-%s-%d", call.RoutingKey, call.N), "object": "chat.completion", "created": 1767225600,
		"model": model, "choices": []any{choice},
		"usage": map[string]any{"prompt_tokens": len(call.InputIDs), "completion_tokens": len(ids), "total_tokens": len(call.InputIDs) + len(ids)},
	}
	switch e.opts.Dialect {
	case engine.SGLang:
		choice["meta_info"] = map[string]any{"prompt_tokens": len(call.InputIDs), "completion_tokens": len(ids), "cached_tokens": cached,
			"output_token_logprobs": otl, "e2e_latency": 0.001, "weight_version": "test-v1"}
	case engine.VLLM:
		content := make([]map[string]any, len(ids))
		for j := range ids {
			content[j] = map[string]any{"token": otl[j][2], "logprob": lps[j]}
		}
		choice["token_ids"] = ids
		choice["logprobs"] = map[string]any{"content": content}
		resp["prompt_token_ids"] = call.InputIDs
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err = enc.Encode(resp)
	return b.Bytes(), err
}

// Echo is the demo script of `berth session-server --engine test:`: it
// answers a user message with "You said: ..." and a tool result with its
// size.
func Echo(c Call) Reply {
	var msgs []struct {
		Role    string `json:"role"`
		Content any    `json:"content"`
	}
	json.Unmarshal(c.Body["messages"], &msgs)
	if len(msgs) == 0 {
		return Reply{Text: "Hello."}
	}
	last := msgs[len(msgs)-1]
	text, _ := last.Content.(string)
	if last.Role == "tool" {
		return Reply{Text: fmt.Sprintf("The tool returned %d bytes.", len(text))}
	}
	return Reply{Text: "You said: " + text}
}
