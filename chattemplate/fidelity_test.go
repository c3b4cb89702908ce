package chattemplate

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth/chattemplate/jinja"
	"github.com/berth-sh/berth/internal/hfref"
)

// conversation is one rendering request as both sides see it.
type conversation map[string]any

var contents = []string{
	"hi", "What files are in /tmp?", "", " leading and trailing ", "多行\n文本\n", "emoji 🤖👍🏽", "tab\there",
	"<tool_response>\nfake\n</tool_response>", "quote \" backslash \\ ", "\n\nnewlines first", "ends with newline\n",
	"Run `ls -la` then report.", "a\u2028b", "{\"json\": [1, 2.5, null]}",
}

var reasonings = []string{"", "I should list the files.", "\nmulti\nline\n", "  spaced  "}

func randomArgs(r *rand.Rand) map[string]any {
	m := map[string]any{}
	keys := []string{"path", "command", "timeout", "recursive", "pattern", "limit"}
	for i := 0; i < 1+r.IntN(3); i++ {
		switch k := keys[r.IntN(len(keys))]; k {
		case "timeout":
			m[k] = []any{30, 1.5, 0.000015, 1e21}[r.IntN(4)]
		case "recursive":
			m[k] = r.IntN(2) == 0
		case "limit":
			m[k] = nil
		default:
			m[k] = contents[r.IntN(len(contents))]
		}
	}
	return m
}

func randomToolCalls(r *rand.Rand) []any {
	var calls []any
	for i := 0; i < 1+r.IntN(3); i++ {
		args := randomArgs(r)
		var a any = args
		if r.IntN(2) == 0 {
			b, _ := json.Marshal(args)
			a = string(b) // OpenAI sends arguments as a JSON string
		}
		call := map[string]any{"id": fmt.Sprintf("call_%d", r.IntN(1000)), "type": "function",
			"function": map[string]any{"name": []string{"bash", "read_file", "search"}[r.IntN(3)], "arguments": a}}
		if r.IntN(5) == 0 { // flat form, no "function" wrapper
			call = map[string]any{"name": "bash", "arguments": a}
		}
		calls = append(calls, call)
	}
	return calls
}

var tools = []any{
	map[string]any{"type": "function", "function": map[string]any{"name": "bash", "description": "Run a shell command.",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{
			"command": map[string]any{"type": "string", "description": "the command"},
			"timeout": map[string]any{"type": "number", "default": 1.5e-05, "minimum": 1.0}},
			"required": []any{"command"}}}},
	map[string]any{"type": "function", "function": map[string]any{"name": "read_file", "description": "Read <a> file & return its text — ünïcode 日本",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}}}},
	map[string]any{"type": "function", "function": map[string]any{"name": "search", "description": "Search.\nTwo lines.",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{}, "additionalProperties": false}}},
}

func randomConversation(r *rand.Rand) conversation {
	var msgs []any
	if r.IntN(2) == 0 {
		msgs = append(msgs, map[string]any{"role": "system", "content": contents[r.IntN(len(contents))]})
	}
	msgs = append(msgs, map[string]any{"role": "user", "content": contents[r.IntN(len(contents))]})
	for turn := 0; turn < r.IntN(8); turn++ {
		a := map[string]any{"role": "assistant", "content": contents[r.IntN(len(contents))]}
		switch r.IntN(4) {
		case 0:
			a["content"] = "<think>\n" + reasonings[r.IntN(len(reasonings))] + "\n</think>\n\n" + a["content"].(string)
		case 1:
			a["reasoning_content"] = reasonings[r.IntN(len(reasonings))]
		}
		if r.IntN(2) == 0 {
			a["tool_calls"] = randomToolCalls(r)
			msgs = append(msgs, a)
			for k := 0; k < 1+r.IntN(2); k++ {
				msgs = append(msgs, map[string]any{"role": "tool", "content": contents[r.IntN(len(contents))], "tool_call_id": "call_1"})
			}
			continue
		}
		msgs = append(msgs, a)
		if r.IntN(3) == 0 {
			break
		}
		role := "user"
		if r.IntN(6) == 0 {
			role = "system"
		}
		msgs = append(msgs, map[string]any{"role": role, "content": contents[r.IntN(len(contents))]})
	}
	c := conversation{"messages": msgs, "add_generation_prompt": r.IntN(3) != 0}
	if r.IntN(2) == 0 {
		n := 1 + r.IntN(len(tools))
		c["tools"] = tools[:n]
	}
	if r.IntN(4) == 0 {
		c["enable_thinking"] = r.IntN(2) == 0
	}
	return c
}

// inputOf decodes a conversation the way a caller of this package does.
func inputOf(t *testing.T, c conversation) Input {
	t.Helper()
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		t.Fatal(err)
	}
	in := Input{Kwargs: map[string]jinja.Value{}}
	list := func(raw json.RawMessage) []jinja.Value {
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			t.Fatal(err)
		}
		out := make([]jinja.Value, len(items))
		for i, it := range items {
			if out[i], err = ParseJSON(it); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	for k, v := range fields {
		switch k {
		case "messages":
			in.Messages = list(v)
		case "tools":
			in.Tools = list(v)
		case "add_generation_prompt":
			in.AddGenerationPrompt = string(v) == "true"
		default:
			if in.Kwargs[k], err = ParseJSON(v); err != nil {
				t.Fatal(err)
			}
		}
	}
	return in
}

// TestQwen3MatchesReference is the chat-template fidelity line:
// Qwen3's real template renders conversations with and without tools
// exactly as @huggingface/jinja renders them.
func TestQwen3MatchesReference(t *testing.T) {
	tpl, err := Load(hfref.RequireQwen3(t))
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 14))
	var convs []conversation
	withTools := 0
	for i := 0; i < 600; i++ {
		c := randomConversation(r)
		if c["tools"] != nil {
			withTools++
		}
		convs = append(convs, c)
	}
	var want []struct {
		OK  *string `json:"ok"`
		Err *string `json:"err"`
	}
	hfref.Run(t, "chat", convs, &want)
	bad := 0
	for i, c := range convs {
		got, err := tpl.Render(inputOf(t, c))
		w := want[i]
		switch {
		case w.Err != nil:
			t.Errorf("reference failed on conversation %d: %s", i, *w.Err)
		case err != nil:
			t.Errorf("conversation %d: %v", i, err)
		case got != *w.OK:
			bad++
			if bad <= 3 {
				t.Errorf("conversation %d differs:\n got %q\nwant %q", i, got, *w.OK)
			}
		}
	}
	t.Logf("%d conversations (%d with tools), %d differ", len(convs), withTools, bad)
	if withTools < 100 || len(convs)-withTools < 100 {
		t.Errorf("corpus too lopsided: %d with tools of %d", withTools, len(convs))
	}
}

func TestLoadNamedTemplatesAndSpecialTokens(t *testing.T) {
	dir := t.TempDir()
	cfg := `{"eos_token": {"content": "</s>", "__type": "AddedToken"}, "bos_token": "<s>", "pad_token": null,
	  "chat_template": [{"name": "default", "template": "D{{ bos_token }}{{ eos_token }}{{ pad_token is defined }}"},
	                    {"name": "tool_use", "template": "T{{ tools|length }}"}]}`
	writeFile(t, dir, "tokenizer_config.json", cfg)
	tpl, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tpl.Render(Input{})
	if err != nil || got != "D<s></s>false" {
		t.Errorf("default = %q, %v", got, err)
	}
	got, err = tpl.Render(Input{Tools: []jinja.Value{jinja.StringValue("x")}})
	if err != nil || got != "T1" {
		t.Errorf("tool_use = %q, %v", got, err)
	}
	// chat_template.jinja wins over the config's template.
	writeFile(t, dir, "chat_template.jinja", "J{{ messages|length }}")
	tpl, err = Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := tpl.Render(Input{}); got != "J0" {
		t.Errorf("chat_template.jinja = %q", got)
	}
}

func TestKwargsAndRaiseException(t *testing.T) {
	tpl, err := New(`{% if not messages %}{{ raise_exception("no messages") }}{% endif %}{{ messages[0].content }}{{ flag }}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tpl.Render(Input{}); err == nil || !strings.Contains(err.Error(), "no messages") {
		t.Errorf("raise_exception: %v", err)
	}
	msg, _ := ParseJSON([]byte(`{"role":"user","content":"c"}`))
	got, err := tpl.Render(Input{Messages: []jinja.Value{msg}, Kwargs: map[string]jinja.Value{"flag": jinja.BoolValue(true)}})
	if err != nil || got != "ctrue" {
		t.Errorf("got %q, %v", got, err)
	}
}

func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
