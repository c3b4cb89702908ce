package chatref

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/testing/hfref"
)

// Case is one rendering: a template source and its variables as JSON, the
// form each engine decodes in its own way (json.loads, JSON.parse,
// jinja.FromJSON).
type Case struct {
	Template string          `json:"template"`
	Vars     json.RawMessage `json:"vars"`
}

// Answer is a reference's result for one Case: exactly one field is set.
type Answer struct {
	OK  *string `json:"ok"`
	Err *string `json:"err"`
}

// script is the Python reference renderer, jinja2ref.py beside this file.
func script() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "jinja2ref.py")
}

// RequirePython skips t unless python3 with jinja2 is installed, and returns
// the interpreter.
func RequirePython(t testing.TB) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: apt-get install python3-jinja2 (.ci/setup does)")
	}
	if err := exec.Command(py, "-c", "import jinja2").Run(); err != nil {
		t.Skip("python3 has no jinja2: apt-get install python3-jinja2 (.ci/setup does)")
	}
	return py
}

// Python renders cases with Python jinja2 configured as transformers'
// apply_chat_template configures it: the reference the trainer uses.
func Python(t testing.TB, cases []Case) []Answer {
	t.Helper()
	py := RequirePython(t)
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, script())
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3 jinja2ref.py: %v\n%s", err, stderr.String())
	}
	var answers []Answer
	if err := json.Unmarshal(out, &answers); err != nil || len(answers) != len(cases) {
		t.Fatalf("python3 jinja2ref.py: bad output (%d answers for %d cases): %v", len(answers), len(cases), err)
	}
	return answers
}

// JS renders cases with @huggingface/jinja (internal/testing/hfref's render mode).
func JS(t testing.TB, cases []Case) []Answer {
	t.Helper()
	var answers []Answer
	hfref.Run(t, "render", cases, &answers)
	if len(answers) != len(cases) {
		t.Fatalf("ref.mjs render: %d answers for %d cases", len(answers), len(cases))
	}
	return answers
}

// Engine renders one case with a Go engine under test.
type Engine func(i int, c Case) (string, error)

// Tally is how often an engine disagrees with a reference: a case differs
// when exactly one side fails or both render and the texts differ (two
// failures agree: their messages are each engine's own).
type Tally struct {
	Cases, Differ int
	Examples      []string // the first few differences, for the test log
}

// MaxExamples is how many differences a Tally keeps.
var MaxExamples = 3

func (t Tally) String() string { return fmt.Sprintf("%d of %d differ", t.Differ, t.Cases) }

// Count runs eng over cases and compares with want.
func Count(eng Engine, cases []Case, want []Answer) Tally {
	tally := Tally{Cases: len(cases)}
	for i, c := range cases {
		got, err := eng(i, c)
		w := want[i]
		var diff string
		switch {
		case w.Err != nil && err == nil:
			diff = fmt.Sprintf("case %d: reference fails (%s), engine renders %q", i, *w.Err, got)
		case w.Err == nil && err != nil:
			diff = fmt.Sprintf("case %d: reference renders %q, engine fails: %v", i, *w.OK, err)
		case w.OK != nil && got != *w.OK:
			diff = fmt.Sprintf("case %d:\n got %q\nwant %q", i, got, *w.OK)
		}
		if diff == "" {
			continue
		}
		tally.Differ++
		if len(tally.Examples) < MaxExamples {
			tally.Examples = append(tally.Examples, diff)
		}
	}
	return tally
}

// HFTemplate reads a model directory's tokenizer_config.json: its chat
// template (a string) and the special-token variables transformers'
// special_tokens_map holds (a token is a string or {"content": ...}).
func HFTemplate(dir string) (string, map[string]string, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		return "", nil, err
	}
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return "", nil, err
	}
	var src string
	if err := json.Unmarshal(cfg["chat_template"], &src); err != nil {
		return "", nil, fmt.Errorf("chat_template: %w", err)
	}
	special := map[string]string{}
	for _, k := range []string{"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"} {
		var s string
		var tok struct{ Content string }
		switch {
		case json.Unmarshal(cfg[k], &s) == nil && s != "":
			special[k] = s
		case json.Unmarshal(cfg[k], &tok) == nil && tok.Content != "":
			special[k] = tok.Content
		}
	}
	return src, special, nil
}
