package jinja

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/berth-sh/berth/internal/testing/chatref"
	"github.com/berth-sh/berth/internal/testing/hfref"
)

// TestMatchesReference renders each case here and with Python jinja2 under
// transformers' settings (the trainer's renderer): every case must render
// the same text, or fail on both sides. Where @huggingface/jinja differs is
// counted and logged only.
func TestMatchesReference(t *testing.T) {
	cases := make([]chatref.Case, len(chatref.Expressions))
	for i, c := range chatref.Expressions {
		cases[i] = chatref.Case{Template: c, Vars: json.RawMessage(chatref.ExpressionVars)}
	}
	var v map[string]json.RawMessage
	if err := json.Unmarshal([]byte(chatref.ExpressionVars), &v); err != nil {
		t.Fatal(err)
	}
	data := map[string]Value{}
	for k, raw := range v {
		val, err := FromJSON(raw)
		if err != nil {
			t.Fatal(err)
		}
		data[k] = val
	}
	eng := func(_ int, c chatref.Case) (string, error) { return renderString(c.Template, data) }
	py := chatref.Count(eng, cases, chatref.Python(t, cases))
	t.Logf("Python jinja2 (transformers): %v", py)
	if py.Differ > 0 {
		t.Errorf("the engine drifted from Python jinja2 on %v:\n%s", py, strings.Join(py.Examples, "\n"))
	}
	if hfref.Available() { // informational: the JavaScript engine prints true, 1 for 1.0, ...
		t.Logf("@huggingface/jinja: %v", chatref.Count(eng, cases, chatref.JS(t, cases)))
	}
}

func renderString(src string, data map[string]Value) (string, error) {
	tpl, err := Compile(src)
	if err != nil {
		return "", err
	}
	return tpl.Render(data)
}
