package jinja

import "testing"

// TestToolCallPrintsAsPython pins, without needing python3, what the
// trainer's renderer (Python jinja2 under transformers, answers recorded
// from internal/testing/chatref/jinja2ref.py) prints for a tool call's
// arguments: 1.0 stays 1.0, True and None are Python's, 1e-05 is Python's
// float repr, an integer past 2^53 keeps its digits, and keys keep the
// client's order ("10" before "9"). The JavaScript engine this package once
// followed printed 1, true, an empty None, 0.00001, 9007199254740992 and
// "9" first; each of those is a different token sequence for the trainer.
func TestToolCallPrintsAsPython(t *testing.T) {
	args, err := FromJSON([]byte(`{"f": 1.0, "i": 9007199254740993, "e": 1e-05, "b": true, "n": null,
		"o": {"x": [1.0, "ü"], "10": 2, "9": 1}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ tpl, want string }{
		{`{{ a.f }} {{ a.b }} {{ a.n }} {{ a.e }} {{ a.i }}`, "1.0 True None 1e-05 9007199254740993"},
		{`{{ a|tojson }}`, `{"f": 1.0, "i": 9007199254740993, "e": 1e-05, "b": true, "n": null, "o": {"x": [1.0, "ü"], "10": 2, "9": 1}}`},
		{`{{ a.o }}`, `{'x': [1.0, 'ü'], '10': 2, '9': 1}`},
		{`{% for k, v in a.items() %}{{ k }}={{ v|tojson if v is not string else v }};{% endfor %}`,
			`f=1.0;i=9007199254740993;e=1e-05;b=true;n=null;o={"x": [1.0, "ü"], "10": 2, "9": 1};`},
	} {
		got, err := renderString(c.tpl, map[string]Value{"a": args})
		if err != nil || got != c.want {
			t.Errorf("%s\n got %q, %v\nwant %q", c.tpl, got, err, c.want)
		}
	}
}
