package tito

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/berth-sh/berth/chattemplate"
	"github.com/berth-sh/berth/tokenizer"
)

// glmTokenizer is a byte-level tokenizer with GLM's role tokens as special
// added tokens (ids 300+), enough to exercise the GLM family rules.
func glmTokenizer(t *testing.T) *tokenizer.Tokenizer {
	t.Helper()
	vocab := map[string]int{}
	// GPT-2's byte alphabet, in byte order.
	n := 0
	for b := 0; b < 256; b++ {
		r := rune(b)
		if !((b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff)) {
			r = rune(256 + n)
			n++
		}
		vocab[string(r)] = b
	}
	var added []map[string]any
	for i, s := range []string{"<|user|>", "<|assistant|>", "<|observation|>", "<|system|>"} {
		added = append(added, map[string]any{"id": 300 + i, "content": s, "special": true})
	}
	doc := map[string]any{
		"added_tokens":  added,
		"pre_tokenizer": map[string]any{"type": "ByteLevel", "add_prefix_space": false},
		"decoder":       map[string]any{"type": "ByteLevel"},
		"model":         map[string]any{"type": "BPE", "vocab": vocab, "merges": []any{}},
	}
	data, _ := json.Marshal(doc)
	tok, err := tokenizer.FromJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// A GLM-4.7-like template: every message opens with its role token, and a
// turn ends where the next role token begins (the model stops at
// <|observation|> or <|user|>).
const glmTemplate = `{%- for m in messages -%}
{%- if m.role == 'tool' -%}<|observation|>{{ m.content }}
{%- else -%}<|{{ m.role }}|>{{ m.content }}{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}<|assistant|>{%- endif -%}`

func glmCodec(t *testing.T) *Codec {
	tpl, err := chattemplate.New(glmTemplate, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCodec(glmTokenizer(t), tpl, Families["glm47"])
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func msg(t *testing.T, s string) Message {
	t.Helper()
	m, err := ParseMessage(json.RawMessage(s))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func ids(t *testing.T, c *Codec, s string) []int {
	out, err := c.Tok.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGLMBoundary: the model's stop token <|observation|> ends the stored
// ids; the next prompt drops it before its own <|observation|>, and the
// commit accepts the one replaced token (max_trim_tokens 1).
func TestGLMBoundary(t *testing.T) {
	c := glmCodec(t)
	kw, err := c.MergeKwargs(nil)
	if err != nil {
		t.Fatal(err)
	}
	var tr Trajectory
	req := []Message{msg(t, `{"role":"user","content":"ls"}`)}
	prompt, err := tr.Prepare(c, req, Tools{}, kw, Strict)
	if err != nil || !slices.Equal(prompt, ids(t, c, "<|user|>ls<|assistant|>")) {
		t.Fatalf("first prompt %v %v", prompt, err)
	}
	out := ids(t, c, "call<|observation|>")
	asst := msg(t, `{"role":"assistant","content":"call"}`)
	if err := tr.Commit(req, asst, Record{PromptIDs: prompt, OutputIDs: out}, c.MaxTrimTokens()); err != nil {
		t.Fatal(err)
	}
	req2 := append(slices.Clone(req), asst, msg(t, `{"role":"tool","content":"a.txt"}`))
	prompt2, err := tr.Prepare(c, req2, Tools{}, kw, Strict)
	if err != nil {
		t.Fatal(err)
	}
	want := ids(t, c, "<|user|>ls<|assistant|>call<|observation|>a.txt<|assistant|>")
	if !slices.Equal(prompt2, want) {
		t.Fatalf("second prompt\n got %v\nwant %v", prompt2, want)
	}
	// The model stopped at <|user|> this time, which the next prompt does
	// not render: only a one-token tail may differ.
	out2 := ids(t, c, "done<|user|>")
	if err := tr.Commit(req2, msg(t, `{"role":"assistant","content":"done"}`), Record{PromptIDs: prompt2, OutputIDs: out2}, c.MaxTrimTokens()); err != nil {
		t.Fatal(err)
	}
	ms := c.Compare(ids(t, c, "<|user|>ls<|assistant|>call<|observation|>a.txt<|assistant|>done"), tr.Tokens())
	if len(ms) != 0 {
		t.Errorf("mismatches %+v", ms)
	}
	// With no trim allowance, the replaced stop token breaks the prefix.
	var pe *PrefixError
	if err := CheckPrefix(ids(t, c, "ab<|user|>"), ids(t, c, "ab<|observation|>x"), 0); !errors.As(err, &pe) || pe.Position != 2 {
		t.Errorf("CheckPrefix: %v", err)
	}
	if err := CheckPrefix(ids(t, c, "ab<|user|>"), ids(t, c, "ab<|observation|>x"), 1); err != nil {
		t.Errorf("one trailing token allowed: %v", err)
	}
}

func TestRollback(t *testing.T) {
	c := glmCodec(t)
	kw, _ := c.MergeKwargs(nil)
	var tr Trajectory
	u := msg(t, `{"role":"user","content":"q"}`)
	turn := func(req []Message, reply string) Message {
		p, err := tr.Prepare(c, req, Tools{}, kw, Strict)
		if err != nil {
			t.Fatal(err)
		}
		a := msg(t, `{"role":"assistant","content":"`+reply+`"}`)
		if err := tr.Commit(req, a, Record{PromptIDs: p, OutputIDs: ids(t, c, reply+"<|observation|>")}, 1); err != nil {
			t.Fatal(err)
		}
		return a
	}
	a1 := turn([]Message{u}, "one")
	o1 := msg(t, `{"role":"tool","content":"r1"}`)
	a2 := turn([]Message{u, a1, o1}, "two")
	o2 := msg(t, `{"role":"tool","content":"r2"}`)
	turn([]Message{u, a1, o1, a2, o2}, "three")

	// Rewriting the second tool result discards one turn: fine.
	snapshot := tr
	other := msg(t, `{"role":"tool","content":"r2 again"}`)
	if _, err := tr.Prepare(c, []Message{u, a1, o1, a2, other}, Tools{}, kw, Strict); err != nil || tr.NumAssistant() != 2 {
		t.Fatalf("one-turn retry: %v, %d turns left", err, tr.NumAssistant())
	}
	// Rewriting the first tool result would discard two: refused, unchanged.
	tr = snapshot
	_, err := tr.Prepare(c, []Message{u, a1, msg(t, `{"role":"tool","content":"r1 edited"}`)}, Tools{}, kw, Strict)
	if !errors.Is(err, ErrInvalid) || tr.NumAssistant() != 3 || len(tr.Messages()) != 6 {
		t.Fatalf("two-turn rewrite: %v, %d turns", err, tr.NumAssistant())
	}
	// Retrying the very first turn empties the session.
	var first Trajectory
	p, _ := first.Prepare(c, []Message{u}, Tools{}, kw, Strict)
	first.Commit([]Message{u}, a1, Record{PromptIDs: p, OutputIDs: ids(t, c, "one")}, 1)
	if _, err := first.Prepare(c, []Message{u}, Tools{}, kw, Strict); err != nil || first.NumAssistant() != 0 {
		t.Errorf("first-turn retry: %v %d", err, first.NumAssistant())
	}
}

// TestMatchers: each of Miles's matcher modes accepts what the stricter
// ones accept, and the replays Miles's hub tests name: strict ignores
// empty-value spellings, extra keys and index; loose_tool_call also takes
// re-serialized arguments but not another call id; role_content_only takes
// any tool calls and reasoning with the same role and content.
func TestMatchers(t *testing.T) {
	stored := msg(t, `{"role":"assistant","content":"","reasoning_content":"think","tool_calls":[{"id":"c1","type":"function","index":0,"function":{"name":"f","arguments":"{\"a\": 1}"}}]}`)
	for _, c := range []struct {
		replay                string
		strict, loose, rcOnly bool
	}{
		{`{"role":"assistant","content":null,"reasoning_content":"think","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\": 1}"}}],"extra":1}`, true, true, true},
		{`{"role":"assistant","reasoning_content":"think","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1.0}"}}]}`, false, true, true},
		{`{"role":"assistant","reasoning_content":"think","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":{"a":1}}}]}`, false, true, true},
		{`{"role":"assistant","content":"","reasoning_content":"think","tool_calls":[{"id":"c2","type":"function","function":{"name":"f","arguments":"{\"a\": 1}"}}]}`, false, false, true},
		{`{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\": 1}"}}]}`, false, false, true},
		{`{"role":"assistant","content":""}`, false, false, true},
		{`{"role":"assistant","content":" ","reasoning_content":"think","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\": 1}"}}]}`, false, false, false},
		{`{"role":"user","content":""}`, false, false, false},
	} {
		r := msg(t, c.replay)
		if Strict.Match(stored, r) != c.strict || LooseToolCall.Match(stored, r) != c.loose || RoleContentOnly.Match(stored, r) != c.rcOnly {
			t.Errorf("%s: strict %v loose %v role_content_only %v", c.replay, Strict.Match(stored, r), LooseToolCall.Match(stored, r), RoleContentOnly.Match(stored, r))
		}
	}
	for _, name := range []string{"strict", "loose_tool_call", "role_content_only"} {
		if m, err := ParseMatcher(name); err != nil || m.String() != name {
			t.Errorf("%s: %v %v", name, m, err)
		}
	}
	for _, bad := range []string{"fuzzy", "my.module.matcher"} {
		if _, err := ParseMatcher(bad); err == nil {
			t.Errorf("matcher %q accepted", bad)
		}
	}
	if Strict.AtLeast(LooseToolCall) != LooseToolCall || RoleContentOnly.AtLeast(LooseToolCall) != RoleContentOnly {
		t.Error("AtLeast is not the looser mode")
	}
}

func TestFamilyTokensMustExist(t *testing.T) {
	tpl, _ := chattemplate.New(glmTemplate, nil)
	if _, err := NewCodec(glmTokenizer(t), tpl, Families["qwen3"]); err == nil {
		t.Error("qwen3 rules accepted a tokenizer without <|im_end|>")
	}
	if _, err := LookupFamily("llama9"); err == nil {
		t.Error("unknown family accepted")
	}
}

// TestMaxTokensBoundsPrepare: a trajectory's MaxTokens bounds the first
// prompt and every later one (stored ids and increment together); a
// prompt over it is ErrTooLong (an ErrInvalid, 400) naming the limit, and
// a prompt at it passes.
func TestMaxTokensBoundsPrepare(t *testing.T) {
	c := glmCodec(t)
	kw, _ := c.MergeKwargs(nil)
	u := msg(t, `{"role":"user","content":"ls"}`)
	first := len(ids(t, c, "<|user|>ls<|assistant|>"))
	tr := Trajectory{MaxTokens: first - 1}
	if _, err := tr.Prepare(c, []Message{u}, Tools{}, kw, Strict); !errors.Is(err, ErrTooLong) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("first prompt over the limit: %v", err)
	}
	tr.MaxTokens = first + 3
	prompt, err := tr.Prepare(c, []Message{u}, Tools{}, kw, Strict)
	if err != nil {
		t.Fatal(err)
	}
	asst := msg(t, `{"role":"assistant","content":"x"}`)
	if err := tr.Commit([]Message{u}, asst, Record{PromptIDs: prompt, OutputIDs: ids(t, c, "x<|observation|>")}, 1); err != nil {
		t.Fatal(err)
	}
	req := []Message{u, asst, msg(t, `{"role":"tool","content":"a.txt b.txt"}`)}
	if _, err := tr.Prepare(c, req, Tools{}, kw, Strict); !errors.Is(err, ErrTooLong) {
		t.Fatalf("second prompt over the limit: %v", err)
	}
	want := ids(t, c, "<|user|>ls<|assistant|>x<|observation|>a.txt b.txt<|assistant|>")
	tr.MaxTokens = len(want)
	if got, err := tr.Prepare(c, req, Tools{}, kw, Strict); err != nil || !slices.Equal(got, want) {
		t.Fatalf("a prompt at the limit: %v %v", got, err)
	}
}

// TestContentMustBeStringNullOrParts: an object, a number or a boolean as
// content is refused as invalid (on 5553f78 it reached the template).
func TestContentMustBeStringNullOrParts(t *testing.T) {
	for _, content := range []string{`{"text":"hi"}`, `{}`, `42`, `true`} {
		if _, err := ParseMessage(json.RawMessage(`{"role":"user","content":` + content + `}`)); !errors.Is(err, ErrInvalid) {
			t.Errorf("content %s: %v", content, err)
		}
	}
	for _, content := range []string{`"hi"`, `null`, `[{"type":"text","text":"hi"}]`} {
		if _, err := ParseMessage(json.RawMessage(`{"role":"user","content":` + content + `}`)); err != nil {
			t.Errorf("content %s: %v", content, err)
		}
	}
}
