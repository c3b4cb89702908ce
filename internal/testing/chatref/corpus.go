package chatref

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
)

// Obj is a JSON object that keeps its key order (a Go map would sort the
// keys, and key order is what a template iterating .items() prints).
type Obj []Field

// Field is one key of an Obj.
type Field struct {
	K string
	V any
}

// MarshalJSON writes the fields in order.
func (o Obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.K)
		v, err := json.Marshal(f.V)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Get returns the value of key k.
func (o Obj) Get(k string) (any, bool) {
	for _, f := range o {
		if f.K == k {
			return f.V, true
		}
	}
	return nil, false
}

// n is a JSON number written exactly as a client writes it: "1.0" and "1"
// are the same number to JavaScript and different ones (float, int) to
// Python, which is where the two references part.
func n(s string) json.Number { return json.Number(s) }

var contents = []string{
	"hi", "What files are in /tmp?", "", " leading and trailing ", "多行\n文本\n", "emoji 🤖👍🏽", "tab\there",
	"<tool_response>\nfake\n</tool_response>", "quote \" backslash \\ ", "\n\nnewlines first", "ends with newline\n",
	"Run `ls -la` then report.", "a\u2028b", "{\"json\": [1, 2.5, null]}", "True or None?", "café ☕ naïve Ωmega",
}

var reasonings = []string{"", "I should list the files.", "\nmulti\nline\n", "  spaced  "}

// numbers are the tool-argument numbers as clients write them: integral
// floats (1.0, -3.0, 100.0), exponents, a big integer past 2^53 (exact in
// Python, rounded in JavaScript), and plain ones.
var numbers = []json.Number{n("1.0"), n("30"), n("1.5"), n("0.000015"), n("1e21"), n("-3.0"), n("100.0"), n("2.50"),
	n("1e-05"), n("0"), n("-7"), n("9007199254740993"), n("0.1"), n("3.14159"), n("1E+2"), n("-0.0")}

func randomValue(r *rand.Rand, depth int) any {
	switch k := r.IntN(9); {
	case k < 3:
		return numbers[r.IntN(len(numbers))]
	case k == 3:
		return r.IntN(2) == 0
	case k == 4:
		return nil
	case k == 5 && depth < 2: // nested object
		return Obj{{"depth", numbers[r.IntN(len(numbers))]}, {"follow", r.IntN(2) == 0},
			{"名前", contents[r.IntN(len(contents))]}, {"inner", randomValue(r, depth+1)}}
	case k == 6 && depth < 2: // list of mixed values
		return []any{randomValue(r, depth+1), contents[r.IntN(len(contents))], numbers[r.IntN(len(numbers))]}
	}
	return contents[r.IntN(len(contents))]
}

func randomArgs(r *rand.Rand) Obj {
	keys := []string{"path", "command", "timeout", "recursive", "pattern", "limit", "options", "ratio", "ünïcode"}
	var args Obj
	seen := map[string]bool{}
	for i := 0; i < 1+r.IntN(4); i++ {
		k := keys[r.IntN(len(keys))]
		if seen[k] {
			continue
		}
		seen[k] = true
		switch k {
		case "timeout", "ratio":
			args = append(args, Field{k, numbers[r.IntN(len(numbers))]})
		case "recursive":
			args = append(args, Field{k, r.IntN(2) == 0})
		case "limit":
			args = append(args, Field{k, nil})
		case "options":
			args = append(args, Field{k, randomValue(r, 0)})
		default:
			args = append(args, Field{k, contents[r.IntN(len(contents))]})
		}
	}
	return args
}

func randomToolCalls(r *rand.Rand) []any {
	var calls []any
	for i := 0; i < 1+r.IntN(3); i++ {
		args := randomArgs(r)
		var a any = args
		if r.IntN(4) == 0 {
			b, _ := json.Marshal(args)
			a = string(b) // OpenAI sends arguments as a JSON string
		}
		name := []string{"bash", "read_file", "search"}[r.IntN(3)]
		var call any = Obj{{"id", fmt.Sprintf("call_%d", r.IntN(1000))}, {"type", "function"},
			{"function", Obj{{"name", name}, {"arguments", a}}}}
		if r.IntN(5) == 0 { // flat form, no "function" wrapper
			call = Obj{{"name", name}, {"arguments", a}}
		}
		calls = append(calls, call)
	}
	return calls
}

// Tools are the tool schemas of the corpus: numbers written as floats
// (minimum 1.0), exponents, booleans, nested schemas and unicode.
var Tools = []any{
	Obj{{"type", "function"}, {"function", Obj{{"name", "bash"}, {"description", "Run a shell command."},
		{"parameters", Obj{{"type", "object"}, {"properties", Obj{
			{"command", Obj{{"type", "string"}, {"description", "the command"}}},
			{"timeout", Obj{{"type", "number"}, {"default", n("1.5e-05")}, {"minimum", n("1.0")}, {"maximum", n("600.0")}}}}},
			{"required", []any{"command"}}}}}}},
	Obj{{"type", "function"}, {"function", Obj{{"name", "read_file"}, {"description", "Read <a> file & return its text — ünïcode 日本"},
		{"parameters", Obj{{"type", "object"}, {"properties", Obj{{"path", Obj{{"type", "string"}}},
			{"encoding", Obj{{"type", "string"}, {"enum", []any{"utf-8", "latin-1"}}, {"default", "utf-8"}}}}}}}}}},
	Obj{{"type", "function"}, {"function", Obj{{"name", "search"}, {"description", "Search.\nTwo lines."},
		{"parameters", Obj{{"type", "object"}, {"properties", Obj{
			{"query", Obj{{"type", "string"}}},
			{"filters", Obj{{"type", "object"}, {"properties", Obj{{"score", Obj{{"type", "number"}, {"exclusiveMinimum", n("0.0")}}},
				{"exact", Obj{{"type", "boolean"}, {"default", true}}}}}}}}},
			{"additionalProperties", false}, {"strict", true}}}}}},
}

// Conversation is one rendering request without the special tokens: the
// keys messages, tools (nil: none), add_generation_prompt and any
// chat_template_kwargs (enable_thinking).
type Conversation = Obj

func randomConversation(r *rand.Rand) Conversation {
	var msgs []any
	msg := func(role, content string) Obj { return Obj{{"role", role}, {"content", content}} }
	if r.IntN(2) == 0 {
		msgs = append(msgs, msg("system", contents[r.IntN(len(contents))]))
	}
	msgs = append(msgs, msg("user", contents[r.IntN(len(contents))]))
	for turn := 0; turn < r.IntN(8); turn++ {
		a := msg("assistant", contents[r.IntN(len(contents))])
		switch r.IntN(4) {
		case 0:
			a[1].V = "<think>\n" + reasonings[r.IntN(len(reasonings))] + "\n</think>\n\n" + a[1].V.(string)
		case 1:
			a = append(a, Field{"reasoning_content", reasonings[r.IntN(len(reasonings))]})
		}
		if r.IntN(2) == 0 {
			msgs = append(msgs, append(a, Field{"tool_calls", randomToolCalls(r)}))
			for k := 0; k < 1+r.IntN(2); k++ {
				msgs = append(msgs, append(msg("tool", contents[r.IntN(len(contents))]), Field{"tool_call_id", "call_1"}))
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
		msgs = append(msgs, msg(role, contents[r.IntN(len(contents))]))
	}
	var tools any // null: the template sees tools = none, as apply_chat_template passes it
	if r.IntN(2) == 0 {
		tools = Tools[:1+r.IntN(len(Tools))]
	}
	c := Conversation{{"messages", msgs}, {"tools", tools}, {"documents", nil}, {"add_generation_prompt", r.IntN(3) != 0}}
	if r.IntN(4) == 0 {
		c = append(c, Field{"enable_thinking", r.IntN(2) == 0})
	}
	return c
}

// Conversations is the chat corpus: count conversations drawn from seed,
// about half of them with tools and most with tool calls.
func Conversations(seed uint64, count int) []Conversation {
	r := rand.New(rand.NewPCG(seed, 14))
	out := make([]Conversation, count)
	for i := range out {
		out[i] = randomConversation(r)
	}
	return out
}

// ChatCases pairs each conversation with the template and the special-token
// variables, merged as transformers merges them: {**special_tokens_map,
// **kwargs}, the conversation's keys winning.
func ChatCases(template string, special map[string]string, convs []Conversation) ([]Case, error) {
	cases := make([]Case, len(convs))
	for i, c := range convs {
		vars := Obj{}
		for _, k := range slices.Sorted(maps.Keys(special)) {
			if _, ok := c.Get(k); !ok {
				vars = append(vars, Field{k, special[k]})
			}
		}
		raw, err := json.Marshal(append(vars, c...))
		if err != nil {
			return nil, err
		}
		cases[i] = Case{Template: template, Vars: raw}
	}
	return cases, nil
}
