package tito

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/berth-sh/berth/chattemplate"
	"github.com/berth-sh/berth/chattemplate/jinja"
	"github.com/berth-sh/berth/tokenizer"
)

// ErrTokenization marks a failure of the TITO machinery itself (HTTP 500):
// a template that does not render the increment as a suffix, a broken
// prefix invariant.
var ErrTokenization = errors.New("tokenization error")

// ErrTooLong marks a prompt with more ids than its limit (an ErrInvalid).
var ErrTooLong = fmt.Errorf("%w: too many tokens", ErrInvalid)

// Codec renders and tokenizes for one model: tokenizer, chat template and
// family rules. It is immutable and safe for concurrent use.
type Codec struct {
	Tok    *tokenizer.Tokenizer
	Tpl    *chattemplate.Template
	Family Family

	appendAfter    map[int][]int
	endOfTurn      int // -1: none
	strip          map[int]bool
	trailing       map[int]bool
	assistantStart string
	dummySystem    jinja.Value
}

// LoadCodec loads a Hugging Face model directory (tokenizer.json and
// tokenizer_config.json) for the named family. A non-empty templatePath
// replaces the model's chat template.
func LoadCodec(dir, family, templatePath string) (*Codec, error) {
	fam, err := LookupFamily(family)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, err
	}
	tpl, err := chattemplate.LoadWithTemplate(dir, templatePath)
	if err != nil {
		return nil, err
	}
	return NewCodec(tok, tpl, fam)
}

// NewCodec checks that the family's tokens exist in the tokenizer.
func NewCodec(tok *tokenizer.Tokenizer, tpl *chattemplate.Template, fam Family) (*Codec, error) {
	c := &Codec{Tok: tok, Tpl: tpl, Family: fam, appendAfter: map[int][]int{}, endOfTurn: -1, strip: map[int]bool{}, trailing: map[int]bool{}}
	id := func(tokStr string) (int, error) {
		ids, err := tok.Encode(tokStr)
		if err != nil || len(ids) != 1 {
			return 0, fmt.Errorf("family %s: %q is not a single token of this tokenizer", fam.Name, tokStr)
		}
		return ids[0], nil
	}
	if fam.EndOfTurn != "" {
		eot, err := id(fam.EndOfTurn)
		if err != nil {
			return nil, err
		}
		c.endOfTurn = eot
	}
	for k, v := range fam.AppendAfter {
		kid, err := id(k)
		if err != nil {
			return nil, err
		}
		if c.appendAfter[kid], err = tok.Encode(v); err != nil {
			return nil, err
		}
	}
	for _, s := range fam.StripTrailing {
		sid, err := id(s)
		if err != nil {
			return nil, err
		}
		c.strip[sid] = true
	}
	for _, s := range fam.TrailingTokens {
		sid, err := id(s)
		if err != nil {
			return nil, err
		}
		c.trailing[sid] = true
	}
	c.dummySystem, _ = chattemplate.ParseJSON([]byte(`{"role":"system","content":"dummy system"}`))
	c.assistantStart = fam.AssistantStart
	if c.assistantStart == "" {
		c.assistantStart = c.generationPrompt()
	}
	return c, nil
}

// generationPrompt is the text add_generation_prompt adds after a user
// message, without trailing whitespace: where an assistant turn starts.
func (c *Codec) generationPrompt() string {
	u, _ := chattemplate.ParseJSON([]byte(`{"role":"user","content":"x"}`))
	msgs := []jinja.Value{u}
	a, err1 := c.Tpl.Render(chattemplate.Input{Messages: msgs})
	b, err2 := c.Tpl.Render(chattemplate.Input{Messages: msgs, AddGenerationPrompt: true})
	if err1 != nil || err2 != nil || !strings.HasPrefix(b, a) {
		return ""
	}
	return strings.TrimRight(b[len(a):], " \n")
}

// MaxTrimTokens is the family's trim allowance.
func (c *Codec) MaxTrimTokens() int { return c.Family.MaxTrimTokens }

// Kwargs are one request's template variables: the family's fixed
// chat_template_kwargs merged with the request's.
type Kwargs struct {
	vals map[string]jinja.Value
	// JSON is the merged object, forwarded to the engine; nil when empty.
	JSON map[string]json.RawMessage
}

// reservedKwargs are variables a request may not set: the conversation
// itself and the template's globals.
var reservedKwargs = map[string]bool{"messages": true, "tools": true, "documents": true, "add_generation_prompt": true,
	"true": true, "false": true, "none": true, "True": true, "False": true, "None": true, "namespace": true,
	"range": true, "raise_exception": true, "strftime_now": true}

// MaxKwargs bounds the number of chat_template_kwargs.
const MaxKwargs = 64

// MergeKwargs merges a request's chat_template_kwargs (a JSON object, or
// empty) with the family's; a conflicting value is refused.
func (c *Codec) MergeKwargs(raw json.RawMessage) (Kwargs, error) {
	merged := map[string]json.RawMessage{}
	for k, v := range c.Family.TemplateKwargs {
		merged[k] = v
	}
	if t := bytes.TrimSpace(raw); len(t) > 0 && string(t) != "null" {
		var req map[string]json.RawMessage
		if err := json.Unmarshal(t, &req); err != nil || req == nil {
			return Kwargs{}, invalidf("chat_template_kwargs must be an object")
		}
		if len(req) > MaxKwargs {
			return Kwargs{}, invalidf("chat_template_kwargs has %d keys, more than %d", len(req), MaxKwargs)
		}
		for k, v := range req {
			if reservedKwargs[k] {
				return Kwargs{}, invalidf("chat_template_kwargs may not set %q", k)
			}
			if fixed, ok := c.Family.TemplateKwargs[k]; ok && !sameJSON(fixed, v) {
				return Kwargs{}, invalidf("chat template kwarg %s=%s conflicts with the value the %s family fixes: %s", k, clip(string(v)), c.Family.Name, fixed)
			}
			merged[k] = v
		}
	}
	kw := Kwargs{vals: map[string]jinja.Value{}}
	for k, v := range merged {
		val, err := chattemplate.ParseJSON(v)
		if err != nil {
			return Kwargs{}, invalidf("chat_template_kwargs.%s: %v", k, err)
		}
		kw.vals[k] = val
	}
	if len(merged) > 0 {
		kw.JSON = merged
	}
	return kw, nil
}

func sameJSON(a, b json.RawMessage) bool {
	x, err1 := decodeAny(a)
	y, err2 := decodeAny(b)
	if err1 != nil || err2 != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// MaxTools bounds a request's tool list.
const MaxTools = 512

// Tools are a request's tool definitions as the chat template sees them,
// parsed once by ParseTools; the zero value is no tools. They keep the
// template engine's values to themselves, so that no caller depends on
// the engine.
type Tools struct {
	vals []jinja.Value
}

// Len is the number of tools.
func (t Tools) Len() int { return len(t.vals) }

// ParseTools decodes a request's tools (a JSON array, or empty); a tool
// without the {"type": "function", "function": ...} wrapper gets one.
func ParseTools(raw json.RawMessage) (Tools, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return Tools{}, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(t, &items); err != nil {
		return Tools{}, invalidf("tools must be an array")
	}
	if len(items) == 0 {
		return Tools{}, nil
	}
	if len(items) > MaxTools {
		return Tools{}, invalidf("%d tools, more than %d", len(items), MaxTools)
	}
	out := make([]jinja.Value, len(items))
	for i, it := range items {
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(it, &probe); err != nil || probe == nil {
			return Tools{}, invalidf("tool %d must be an object", i)
		}
		if _, ok := probe["function"]; !ok {
			it = append(append(json.RawMessage(`{"type":"function","function":`), it...), '}')
		}
		v, err := chattemplate.ParseJSON(it)
		if err != nil {
			return Tools{}, invalidf("tool %d: %v", i, err)
		}
		out[i] = v
	}
	return Tools{vals: out}, nil
}

func values(msgs []Message) ([]jinja.Value, error) {
	out := make([]jinja.Value, len(msgs))
	for i, m := range msgs {
		v, err := m.val.get()
		if err != nil {
			return nil, fmt.Errorf("%w: message %d: %v", ErrInvalid, i, err)
		}
		out[i] = v
	}
	return out, nil
}

func (c *Codec) render(msgs []jinja.Value, tools Tools, gen bool, kw Kwargs) (string, error) {
	s, err := c.Tpl.Render(chattemplate.Input{Messages: msgs, Tools: tools.vals, AddGenerationPrompt: gen, Kwargs: kw.vals})
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrTokenization, err)
	}
	return s, nil
}

// encode tokenizes s; a limit above 0 bounds the ids (ErrTooLong past it).
func (c *Codec) encode(s string, limit int) ([]int, error) {
	var ids []int
	var err error
	if limit > 0 {
		ids, err = c.Tok.EncodeLimit(s, limit)
	} else {
		ids, err = c.Tok.Encode(s)
	}
	switch {
	case errors.Is(err, tokenizer.ErrTooManyTokens):
		return nil, ErrTooLong
	case errors.Is(err, tokenizer.ErrPieceTooLong):
		return nil, invalidf("the text has a run of letters, spaces or punctuation longer than the %d bytes the server tokenizes", tokenizer.MaxPieceBytes)
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrTokenization, err)
	}
	return ids, nil
}

// Render renders msgs as text.
func (c *Codec) Render(msgs []Message, tools Tools, gen bool, kw Kwargs) (string, error) {
	vals, err := values(msgs)
	if err != nil {
		return "", err
	}
	return c.render(vals, tools, gen, kw)
}

// RenderIDs renders msgs and tokenizes the text.
func (c *Codec) RenderIDs(msgs []Message, tools Tools, gen bool, kw Kwargs) ([]int, error) {
	return c.renderIDs(msgs, tools, gen, kw, 0)
}

func (c *Codec) renderIDs(msgs []Message, tools Tools, gen bool, kw Kwargs, limit int) ([]int, error) {
	s, err := c.Render(msgs, tools, gen, kw)
	if err != nil {
		return nil, err
	}
	return c.encode(s, limit)
}

// dummyAssistant stands in for the stored history's last turn: empty, but
// with that turn's tool calls, which some templates read when rendering the
// tool results that follow.
func dummyAssistant(last Message) jinja.Value {
	calls := json.RawMessage("[]")
	if last.Role == "assistant" && len(bytes.TrimSpace(last.toolCalls)) > 0 && string(bytes.TrimSpace(last.toolCalls)) != "null" {
		calls = last.toolCalls
	}
	raw := append(append(json.RawMessage(`{"role":"assistant","content":"","reasoning_content":" ","tool_calls":`), calls...), '}')
	v, err := chattemplate.ParseJSON(raw)
	if err != nil {
		v, _ = chattemplate.ParseJSON([]byte(`{"role":"assistant","content":"","reasoning_content":" ","tool_calls":[]}`))
	}
	return v
}

// Increment returns the ids of appended messages and the generation
// prompt, rendered after a synthetic [system, assistant] prefix so that
// the cost does not grow with the conversation and templates that rewrite
// earlier turns (Qwen3 drops old reasoning) cannot disturb the suffix. A
// limit above 0 bounds its ids (ErrTooLong past it).
func (c *Codec) Increment(last Message, appended []Message, tools Tools, kw Kwargs, limit int) ([]int, error) {
	base := []jinja.Value{c.dummySystem, dummyAssistant(last)}
	without, err := c.render(base, tools, false, kw)
	if err != nil {
		return nil, err
	}
	vals, err := values(appended)
	if err != nil {
		return nil, err
	}
	with, err := c.render(append(base, vals...), tools, true, kw)
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(with, without) {
		roles := make([]string, len(appended))
		for i, m := range appended {
			roles[i] = m.Role
		}
		return nil, fmt.Errorf("%w: the chat template does not render the appended messages %v as a suffix", ErrTokenization, roles)
	}
	return c.encode(with[len(without):], limit)
}

// Join appends an increment to stored ids across the family's boundary:
// a turn that ended without the family's end-of-turn token is closed with
// it first (a reply cut at max_tokens stops mid-turn, and the template
// renders the turn closed: without the token the next prompt would go on
// from the cut text straight into the next message, which no rendering
// of the conversation has).
func (c *Codec) Join(prefix, inc []int) []int {
	out := make([]int, 0, len(prefix)+len(inc)+2)
	out = append(out, prefix...)
	if n := len(out); n > 0 && c.endOfTurn >= 0 && out[n-1] != c.endOfTurn {
		out = append(out, c.endOfTurn)
	}
	if n := len(out); n > 0 {
		if add, ok := c.appendAfter[out[n-1]]; ok {
			out = append(out, add...)
		} else if c.strip[out[n-1]] {
			out = out[:n-1]
		}
	}
	return append(out, inc...)
}

// AssistantIDs tokenizes an assistant message as the template renders it
// after a generation prompt, without the family's trailing boundary tokens:
// the ids a model would have produced. It serves engines that return text
// only; such ids are a re-tokenization and are counted as one.
func (c *Codec) AssistantIDs(asst Message, tools Tools, kw Kwargs) ([]int, error) {
	u, _ := chattemplate.ParseJSON([]byte(`{"role":"user","content":"x"}`))
	base := []jinja.Value{c.dummySystem, u}
	prompt, err := c.render(base, tools, true, kw)
	if err != nil {
		return nil, err
	}
	av, err := asst.val.get()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	full, err := c.render(append(base, av), tools, false, kw)
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(full, prompt) {
		return nil, fmt.Errorf("%w: the chat template does not render the assistant message after its generation prompt", ErrTokenization)
	}
	ids, err := c.encode(full[len(prompt):], 0)
	if err != nil {
		return nil, err
	}
	for len(ids) > 0 && c.trailing[ids[len(ids)-1]] {
		ids = ids[:len(ids)-1]
	}
	return ids, nil
}
