package tito

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/berth-sh/berth/chattemplate"
	"github.com/berth-sh/berth/chattemplate/jinja"
)

// ErrInvalid marks a request the session refuses (HTTP 400): malformed
// messages, history rewritten too far back, a conflicting template kwarg.
var ErrInvalid = errors.New("invalid request")

func invalidf(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, a...))
}

// Message is one chat message as the session keeps it: its JSON as it
// came (kept for records), its role, the value the template renders, and
// the keys the matchers compare.
type Message struct {
	Raw       json.RawMessage
	Role      string
	val       *lazyValue
	strict    string
	loose     string
	roleText  string // role and content only (RoleContentOnly)
	toolCalls json.RawMessage
}

// lazyValue decodes a message for the template on first use: most stored
// messages are only ever compared, and a turn renders only the new ones.
type lazyValue struct {
	once sync.Once
	raw  json.RawMessage
	v    jinja.Value
	err  error
}

func (l *lazyValue) get() (jinja.Value, error) {
	l.once.Do(func() { l.v, l.err = chattemplate.ParseJSON(l.raw) })
	return l.v, l.err
}

// Roles a message may have.
var roles = map[string]bool{"system": true, "user": true, "assistant": true, "tool": true, "developer": true}

// ParseMessage validates and decodes one chat message. Content may be a
// string, null, or a list of text parts (joined with "\n" for the template,
// as engines do for text-only content); other parts, and other values (an
// object, a number), are refused.
func ParseMessage(raw json.RawMessage) (Message, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return Message{}, invalidf("a message must be a JSON object")
	}
	var role string
	if err := json.Unmarshal(fields["role"], &role); err != nil || !roles[role] {
		return Message{}, invalidf("message role %s is not one of system, user, assistant, tool, developer", clip(string(fields["role"])))
	}
	m := Message{Raw: append(json.RawMessage(nil), raw...), Role: role, toolCalls: fields["tool_calls"]}
	render := raw
	c := bytes.TrimSpace(fields["content"])
	if len(c) > 0 && c[0] != '"' && c[0] != '[' && string(c) != "null" {
		return Message{}, invalidf("message content must be a string, null or a list of text parts, not %s", clip(string(c)))
	}
	if len(c) > 0 && c[0] == '[' {
		text, err := joinTextParts(c)
		if err != nil {
			return Message{}, err
		}
		flat := make(map[string]json.RawMessage, len(fields))
		for k, v := range fields {
			flat[k] = v
		}
		flat["content"], _ = json.Marshal(text)
		render = orderedLike(raw, flat)
	}
	if d := jsonDepth(render); d > jinja.MaxJSONDepth {
		return Message{}, invalidf("message nested %d deep, more than %d", d, jinja.MaxJSONDepth)
	}
	m.val = &lazyValue{raw: render}
	var err error
	if m.strict, m.loose, m.roleText, err = matchKeys(fields); err != nil {
		return Message{}, err
	}
	return m, nil
}

func joinTextParts(c json.RawMessage) (string, error) {
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(c, &parts); err != nil {
		return "", invalidf("message content must be a string or a list of parts")
	}
	texts := make([]string, len(parts))
	for i, p := range parts {
		if p.Type != "text" || p.Text == nil {
			return "", invalidf("content part %d has type %q: only text parts are supported", i, p.Type)
		}
		texts[i] = *p.Text
	}
	return strings.Join(texts, "\n"), nil
}

// orderedLike re-encodes fields in the key order of orig (the template
// sees keys in the order the client sent them).
func orderedLike(orig json.RawMessage, fields map[string]json.RawMessage) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(orig))
	var keys []string
	if t, err := dec.Token(); err == nil && t == json.Delim('{') {
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				break
			}
			keys = append(keys, k.(string))
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				break
			}
		}
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(fields[k])
	}
	b.WriteByte('}')
	return b.Bytes()
}

// jsonDepth is the nesting depth of a JSON text (valid JSON assumed).
func jsonDepth(raw []byte) int {
	depth, most, inStr := 0, 0, false
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case inStr && c == '\\':
			i++
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '[' || c == '{':
			depth++
			most = max(most, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return most
}

// matchKeys are the canonical forms of the fields a template reads (role,
// content, reasoning_content, tool_calls): empty values (null, "", [])
// are the same, a tool call's wire-only "index" is ignored, and in the
// loose form a tool call's JSON-string arguments compare as the object they
// spell; roleText is the form of role and content alone. A key is the
// SHA-256 of the form: a stored message keeps 96 bytes, not a second copy
// of its content.
func matchKeys(fields map[string]json.RawMessage) (strict, loose, roleText string, err error) {
	key := map[string]any{}
	var calls any
	for _, f := range []string{"role", "content", "reasoning_content", "tool_calls"} {
		v, err := decodeAny(fields[f])
		if err != nil {
			return "", "", "", invalidf("message %s: %v", f, err)
		}
		if f == "tool_calls" {
			calls = v
			v = normalizeToolCalls(v, false)
		}
		if !empty(v) {
			key[f] = v
		}
	}
	rc, err := json.Marshal(map[string]any{"role": key["role"], "content": key["content"]})
	if err != nil {
		return "", "", "", err
	}
	b, err := json.Marshal(key)
	if err != nil {
		return "", "", "", err
	}
	strict = digest(b)
	if _, ok := key["tool_calls"]; !ok {
		return strict, strict, digest(rc), nil
	}
	key["tool_calls"] = normalizeToolCalls(calls, true)
	b, err = json.Marshal(key)
	return strict, digest(b), digest(rc), err
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return string(sum[:])
}

func decodeAny(raw json.RawMessage) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	if raw[0] == '"' { // most content: a string needs no number handling, nor the decoder's buffer (a copy of raw)
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return canonicalNumbers(v), nil
}

// canonicalNumbers makes 1 and 1.0 the same, as Python's == does.
func canonicalNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if f, err := x.Float64(); err == nil {
			return f
		}
		return string(x)
	case []any:
		for i := range x {
			x[i] = canonicalNumbers(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = canonicalNumbers(x[k])
		}
	}
	return v
}

func empty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case []any:
		return len(x) == 0
	}
	return false
}

func normalizeToolCalls(v any, loose bool) any {
	calls, ok := v.([]any)
	if !ok {
		return v
	}
	out := make([]any, len(calls))
	for i, c := range calls {
		m, ok := c.(map[string]any)
		if !ok {
			out[i] = c
			continue
		}
		n := make(map[string]any, len(m))
		for k, x := range m {
			if k != "index" {
				n[k] = x
			}
		}
		if fn, ok := n["function"].(map[string]any); ok && loose {
			f := make(map[string]any, len(fn))
			for k, x := range fn {
				f[k] = x
			}
			f["arguments"] = looseArguments(f["arguments"])
			n["function"] = f
		}
		out[i] = n
	}
	return out
}

// looseArguments turns a JSON-object string into the object; "" and null
// are the empty object. Anything else compares as it is.
func looseArguments(a any) any {
	switch x := a.(type) {
	case nil:
		return map[string]any{}
	case string:
		if x == "" {
			return map[string]any{}
		}
		v, err := decodeAny(json.RawMessage(x))
		if obj, ok := v.(map[string]any); err == nil && ok {
			return obj
		}
	}
	return a
}

// Matcher decides whether a replayed message is the stored one: Miles's
// --session-message-matcher (radixark/miles,
// miles/utils/chat_template_utils/message_matcher_hub/funcs.py at
// 31f1ca961a94cb860cec3b2dea34ec332bfa8f76: strict_message_matches,
// loose_tool_call_message_matches, role_content_only_message_matches).
// Each mode accepts everything the one before it accepts. On a mismatch a
// linear session rolls back (or refuses) and a tree session branches; on a
// match the stored message and its ids stay authoritative.
type Matcher int

const (
	// Strict compares the template-relevant fields exactly (the default).
	Strict Matcher = iota
	// LooseToolCall also accepts tool-call arguments that are the same
	// JSON object spelled differently (clients that re-serialize them).
	LooseToolCall
	// RoleContentOnly compares role and content alone: tool calls and
	// reasoning are ignored, so different tool histories can collapse into
	// one lineage (Miles: "high risk").
	RoleContentOnly
)

// matcherNames are the modes by their Miles selector.
var matcherNames = []string{Strict: "strict", LooseToolCall: "loose_tool_call", RoleContentOnly: "role_content_only"}

// ParseMatcher reads "strict", "loose_tool_call" or "role_content_only".
// Miles also takes a dotted import path of a Python matcher, which has no
// meaning here and is refused.
func ParseMatcher(s string) (Matcher, error) {
	if s == "" {
		return Strict, nil
	}
	for m, n := range matcherNames {
		if s == n {
			return Matcher(m), nil
		}
	}
	return 0, fmt.Errorf("unknown message matcher %q (strict, loose_tool_call, role_content_only; a Python matcher's import path has no meaning here)", s)
}

func (m Matcher) String() string {
	if int(m) < len(matcherNames) {
		return matcherNames[m]
	}
	return fmt.Sprintf("Matcher(%d)", int(m))
}

// AtLeast is the looser of m and o.
func (m Matcher) AtLeast(o Matcher) Matcher { return max(m, o) }

// Match reports whether replayed matches stored under m.
func (m Matcher) Match(stored, replayed Message) bool {
	switch m {
	case LooseToolCall:
		return stored.strict == replayed.strict || stored.loose == replayed.loose
	case RoleContentOnly:
		return stored.roleText == replayed.roleText
	}
	return stored.strict == replayed.strict
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
