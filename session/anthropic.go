package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/berth-sh/berth/session/engine"
	"github.com/berth-sh/berth/session/tito"
)

// The Anthropic Messages route converts requests to the chat form the
// session records, and replies back. Anthropic blocks map as:
// text -> content, tool_use -> tool_calls (input as JSON arguments),
// tool_result -> a "tool" message, thinking -> reasoning_content.

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", tito.ErrInvalid, fmt.Sprintf(format, a...))
}

// blocks reads a content that is a string or a list of blocks.
func blocks(raw json.RawMessage) ([]anthropicBlock, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return nil, nil
	}
	if t[0] == '"' {
		var s string
		json.Unmarshal(t, &s)
		return []anthropicBlock{{Type: "text", Text: s}}, nil
	}
	var bs []anthropicBlock
	if err := json.Unmarshal(t, &bs); err != nil {
		return nil, invalid("content must be a string or a list of blocks")
	}
	return bs, nil
}

func textOf(raw json.RawMessage) (string, error) {
	bs, err := blocks(raw)
	if err != nil {
		return "", err
	}
	var parts []string
	for _, b := range bs {
		if b.Type != "text" {
			return "", invalid("only text blocks are supported here, got %q", b.Type)
		}
		parts = append(parts, b.Text)
	}
	return strings.Join(parts, "\n"), nil
}

// mustJSON encodes v without HTML escaping (token text is full of < and >).
func mustJSON(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	return bytes.TrimRight(b.Bytes(), "\n")
}

// fromAnthropic turns a Messages request into chat completion fields.
func fromAnthropic(in map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	for _, k := range []string{"model", "max_tokens", "temperature", "top_p", "top_k", "stream"} {
		if v, ok := in[k]; ok {
			out[k] = v
		}
	}
	if v, ok := in["stop_sequences"]; ok {
		out["stop"] = v
	}
	var msgs []any
	if sys, ok := in["system"]; ok {
		text, err := textOf(sys)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, map[string]any{"role": "system", "content": text})
	}
	var turns []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(in["messages"], &turns); err != nil {
		return nil, invalid("messages must be an array")
	}
	for i, t := range turns {
		bs, err := blocks(t.Content)
		if err != nil {
			return nil, err
		}
		switch t.Role {
		case "user":
			var texts []string
			for _, b := range bs {
				switch b.Type {
				case "text":
					texts = append(texts, b.Text)
				case "tool_result":
					content, err := textOf(b.Content)
					if err != nil {
						return nil, err
					}
					msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": b.ToolUseID, "content": content})
				default:
					return nil, invalid("message %d: block type %q is not supported", i, b.Type)
				}
			}
			if len(texts) > 0 {
				msgs = append(msgs, map[string]any{"role": "user", "content": strings.Join(texts, "\n")})
			}
		case "assistant":
			m := map[string]any{"role": "assistant", "content": ""}
			var texts []string
			var calls []any
			for _, b := range bs {
				switch b.Type {
				case "text":
					texts = append(texts, b.Text)
				case "thinking":
					m["reasoning_content"] = b.Thinking
				case "tool_use":
					args := string(b.Input)
					if args == "" {
						args = "{}"
					}
					calls = append(calls, map[string]any{"id": b.ID, "type": "function",
						"function": map[string]any{"name": b.Name, "arguments": args}})
				default:
					return nil, invalid("message %d: block type %q is not supported", i, b.Type)
				}
			}
			m["content"] = strings.Join(texts, "")
			if len(calls) > 0 {
				m["tool_calls"] = calls
			}
			msgs = append(msgs, m)
		default:
			return nil, invalid("message %d: role %q (user or assistant)", i, t.Role)
		}
	}
	out["messages"] = mustJSON(msgs)
	if raw, ok := in["tools"]; ok {
		var tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		}
		if err := json.Unmarshal(raw, &tools); err != nil {
			return nil, invalid("tools must be an array")
		}
		var ts []any
		for _, t := range tools {
			fn := map[string]any{"name": t.Name, "description": t.Description}
			if len(t.InputSchema) > 0 {
				fn["parameters"] = t.InputSchema
			}
			ts = append(ts, map[string]any{"type": "function", "function": fn})
		}
		if len(ts) > 0 {
			out["tools"] = mustJSON(ts)
		}
	}
	if raw, ok := in["tool_choice"]; ok {
		var tc struct{ Type, Name string }
		json.Unmarshal(raw, &tc)
		switch tc.Type {
		case "any":
			out["tool_choice"] = mustJSON("required")
		case "tool":
			out["tool_choice"] = mustJSON(map[string]any{"type": "function", "function": map[string]any{"name": tc.Name}})
		case "none", "auto":
			out["tool_choice"] = mustJSON(tc.Type)
		}
	}
	return out, nil
}

// anthropicMessage is a Messages API reply.
type anthropicMessage struct {
	ID           string           `json:"id"`
	Type         string           `json:"type"`
	Role         string           `json:"role"`
	Model        string           `json:"model"`
	Content      []map[string]any `json:"content"`
	StopReason   string           `json:"stop_reason"`
	StopSequence *string          `json:"stop_sequence"`
	Usage        map[string]int   `json:"usage"`
}

func toAnthropic(c *engine.Completion) (*anthropicMessage, error) {
	var msg struct {
		Content          string  `json:"content"`
		ReasoningContent *string `json:"reasoning_content"`
		ToolCalls        []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	}
	if err := json.Unmarshal(c.Message, &msg); err != nil {
		return nil, fmt.Errorf("%w: the engine's message does not convert: %v", engine.ErrUpstream, err)
	}
	var id, model string
	json.Unmarshal(c.Response["id"], &id)
	json.Unmarshal(c.Response["model"], &model)
	out := &anthropicMessage{ID: id, Type: "message", Role: "assistant", Model: model, Content: []map[string]any{},
		Usage: map[string]int{"input_tokens": c.Meta.PromptTokens, "output_tokens": len(c.OutputIDs)}}
	if msg.ReasoningContent != nil && *msg.ReasoningContent != "" {
		out.Content = append(out.Content, map[string]any{"type": "thinking", "thinking": *msg.ReasoningContent, "signature": ""})
	}
	if msg.Content != "" {
		out.Content = append(out.Content, map[string]any{"type": "text", "text": msg.Content})
	}
	for _, tc := range msg.ToolCalls {
		input := json.RawMessage(tc.Function.Arguments)
		if !json.Valid(input) || len(bytes.TrimSpace(input)) == 0 || bytes.TrimSpace(input)[0] != '{' {
			input = json.RawMessage("{}")
		}
		out.Content = append(out.Content, map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Function.Name, "input": input})
	}
	switch c.FinishReason {
	case "tool_calls":
		out.StopReason = "tool_use"
	case "length":
		out.StopReason = "max_tokens"
	default:
		out.StopReason = "end_turn"
	}
	return out, nil
}

// writeAnthropicSSE is the fake stream in Anthropic's event form.
func writeAnthropicSSE(w http.ResponseWriter, m *anthropicMessage) {
	sseHeaders(w)
	event := func(typ string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
	}
	start := *m
	start.Content = []map[string]any{}
	start.StopReason = ""
	event("message_start", map[string]any{"type": "message_start", "message": start})
	for i, b := range m.Content {
		var block, delta map[string]any
		switch b["type"] {
		case "text":
			block = map[string]any{"type": "text", "text": ""}
			delta = map[string]any{"type": "text_delta", "text": b["text"]}
		case "thinking":
			block = map[string]any{"type": "thinking", "thinking": ""}
			delta = map[string]any{"type": "thinking_delta", "thinking": b["thinking"]}
		case "tool_use":
			block = map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}
			delta = map[string]any{"type": "input_json_delta", "partial_json": string(b["input"].(json.RawMessage))}
		}
		event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": block})
		event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": delta})
		event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": m.StopReason, "stop_sequence": nil},
		"usage": map[string]int{"output_tokens": m.Usage["output_tokens"]}})
	event("message_stop", map[string]any{"type": "message_stop"})
}
