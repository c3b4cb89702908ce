package chattemplate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth/chattemplate/jinja"
	"github.com/berth-sh/berth/internal/testing/chatref"
	"github.com/berth-sh/berth/internal/testing/hfref"
)

// inputOf decodes a case's conversation the way a caller of this package
// does; documents is always none, as Render passes it.
func inputOf(t *testing.T, conv chatref.Conversation) Input {
	t.Helper()
	in := Input{Kwargs: map[string]jinja.Value{}}
	for _, f := range conv {
		raw, err := json.Marshal(f.V)
		if err != nil {
			t.Fatal(err)
		}
		switch f.K {
		case "messages", "tools":
			var items []json.RawMessage
			if err := json.Unmarshal(raw, &items); err != nil {
				t.Fatal(err)
			}
			vals := make([]jinja.Value, len(items))
			for i, it := range items {
				if vals[i], err = ParseJSON(it); err != nil {
					t.Fatal(err)
				}
			}
			if f.K == "messages" {
				in.Messages = vals
			} else {
				in.Tools = vals
			}
		case "add_generation_prompt":
			in.AddGenerationPrompt = f.V == true
		case "documents":
		default:
			if in.Kwargs[f.K], err = ParseJSON(raw); err != nil {
				t.Fatal(err)
			}
		}
	}
	return in
}

// TestQwen3MatchesReference is the chat-template fidelity line: Qwen3's
// real template renders the corpus (conversations with and without tools,
// tool calls with float, boolean, nested and unicode arguments) exactly as
// Python jinja2 renders it under transformers' apply_chat_template, the
// text the trainer tokenizes. The differences from @huggingface/jinja are
// counted and logged (doc.go has the numbers).
func TestQwen3MatchesReference(t *testing.T) {
	dir := hfref.RequireQwen3(t)
	tpl, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	src, special, err := chatref.HFTemplate(dir)
	if err != nil {
		t.Fatal(err)
	}
	convs := chatref.Conversations(3, 600)
	cases, err := chatref.ChatCases(src, special, convs)
	if err != nil {
		t.Fatal(err)
	}
	withTools := 0
	for _, c := range convs {
		if v, _ := c.Get("tools"); v != nil {
			withTools++
		}
	}
	if withTools < 100 || len(convs)-withTools < 100 {
		t.Errorf("corpus too lopsided: %d with tools of %d", withTools, len(convs))
	}
	berth := func(i int, _ chatref.Case) (string, error) { return tpl.Render(inputOf(t, convs[i])) }
	py := chatref.Count(berth, cases, chatref.Python(t, cases))
	t.Logf("%d conversations (%d with tools): Python jinja2 (transformers): %v", len(convs), withTools, py)
	if py.Differ > 0 {
		t.Errorf("Qwen3's template drifted from Python jinja2 on %v:\n%s", py, strings.Join(py.Examples, "\n"))
	}
	if hfref.Available() { // informational: where transformers.js would render otherwise
		t.Logf("@huggingface/jinja: %v", chatref.Count(berth, cases, chatref.JS(t, cases)))
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
	if err != nil || got != "D<s></s>False" {
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
	if err != nil || got != "cTrue" {
		t.Errorf("got %q, %v", got, err)
	}
}

func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
