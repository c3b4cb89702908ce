package openenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Kind is the JSON type of a field.
type Kind string

// Field kinds.
const (
	String  Kind = "string"
	Boolean Kind = "boolean"
	Number  Kind = "number"
	Integer Kind = "integer"
	Object  Kind = "object"
	Any     Kind = "any"
)

// Field is one field of a Model, declared as the pydantic field it stands
// for: the JSON schema at /schema and the validation of incoming actions
// both come from it.
type Field struct {
	Name     string
	Kind     Kind
	Nullable bool // also accepts null
	Required bool // no default
	Default  any  // the default's JSON value; nil is null
	// Factory: the default comes from a factory (pydantic's
	// default_factory), so the schema shows none.
	Factory     bool
	Description string
	MaxLength   int      // strings; 0: none
	GE, GT      *float64 // numbers: >= GE, > GT
	// Schema, when set, replaces the field's generated JSON schema (for a
	// union pydantic writes its own way); validation then accepts any value.
	Schema map[string]any
}

// Model is a pydantic model as data: the Action, Observation or State of an
// environment.
type Model struct {
	Title       string
	Description string
	Fields      []Field
	// AllowExtra accepts fields not declared (pydantic's extra="allow");
	// otherwise they are extra_forbidden.
	AllowExtra bool
}

// FieldError is one problem, in the shape of pydantic's ValidationError.errors()
// (without its documentation URL).
type FieldError struct {
	Type  string         `json:"type"`
	Loc   []any          `json:"loc"`
	Msg   string         `json:"msg"`
	Input any            `json:"input"`
	Ctx   map[string]any `json:"ctx,omitempty"`
}

// Validate checks a JSON value against the model and returns its fields, or
// every problem found. A value that is not an object is one model_type
// problem.
func (m *Model) Validate(raw json.RawMessage) (map[string]json.RawMessage, []FieldError) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, []FieldError{{Type: "model_type", Loc: []any{},
			Msg: "Input should be a valid dictionary or instance of " + m.Title, Input: jsonValue(raw)}}
	}
	var errs []FieldError
	for _, f := range m.Fields {
		v, ok := obj[f.Name]
		if !ok {
			if f.Required {
				errs = append(errs, FieldError{Type: "missing", Loc: []any{f.Name}, Msg: "Field required", Input: jsonValue(raw)})
			}
			continue
		}
		if e, bad := f.check(v); bad {
			errs = append(errs, e)
		}
	}
	if !m.AllowExtra {
		keys := make([]string, 0, len(obj))
		for k := range obj {
			if !slices.ContainsFunc(m.Fields, func(f Field) bool { return f.Name == k }) {
				keys = append(keys, k)
			}
		}
		// Input order is lost in a map; sorted names keep answers stable.
		slices.Sort(keys)
		for _, k := range keys {
			errs = append(errs, FieldError{Type: "extra_forbidden", Loc: []any{k}, Msg: "Extra inputs are not permitted", Input: jsonValue(obj[k])})
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return obj, nil
}

func (f *Field) check(v json.RawMessage) (FieldError, bool) {
	fail := func(typ, msg string, ctx map[string]any) (FieldError, bool) {
		return FieldError{Type: typ, Loc: []any{f.Name}, Msg: msg, Input: jsonValue(v), Ctx: ctx}, true
	}
	t := bytes.TrimSpace(v)
	if f.Schema != nil || f.Kind == Any {
		return FieldError{}, false
	}
	isNull := string(t) == "null"
	if isNull && f.Nullable {
		return FieldError{}, false
	}
	switch f.Kind {
	case String:
		var s string
		if json.Unmarshal(t, &s) != nil || t[0] != '"' {
			return fail("string_type", "Input should be a valid string", nil)
		}
		if f.MaxLength > 0 && utf8.RuneCountInString(s) > f.MaxLength {
			return fail("string_too_long", fmt.Sprintf("String should have at most %d characters", f.MaxLength), map[string]any{"max_length": f.MaxLength})
		}
	case Boolean:
		if string(t) != "true" && string(t) != "false" {
			return fail("bool_type", "Input should be a valid boolean", nil)
		}
	case Number, Integer:
		var n float64
		if isNull || json.Unmarshal(t, &n) != nil {
			if f.Kind == Integer {
				return fail("int_type", "Input should be a valid integer", nil)
			}
			return fail("float_type", "Input should be a valid number", nil)
		}
		if f.Kind == Integer && (bytes.ContainsAny(t, ".eE") || n != float64(int64(n))) {
			return fail("int_from_float", "Input should be a valid integer, got a number with a fractional part", nil)
		}
		if f.GE != nil && n < *f.GE {
			return fail("greater_than_equal", "Input should be greater than or equal to "+num(*f.GE, f.Kind), map[string]any{"ge": bound(*f.GE, f.Kind)})
		}
		if f.GT != nil && n <= *f.GT {
			return fail("greater_than", "Input should be greater than "+num(*f.GT, f.Kind), map[string]any{"gt": bound(*f.GT, f.Kind)})
		}
	case Object:
		var o map[string]json.RawMessage
		if json.Unmarshal(t, &o) != nil || o == nil {
			return fail("dict_type", "Input should be a valid dictionary", nil)
		}
	}
	return FieldError{}, false
}

func num(f float64, k Kind) string {
	if k == Integer {
		return fmt.Sprint(int64(f))
	}
	return pyFloat(&f)
}

func bound(f float64, k Kind) any {
	if k == Integer {
		return int64(f)
	}
	return Float(f)
}

// jsonValue decodes raw for echoing it in an error's input; invalid JSON
// is echoed as the text it was.
func jsonValue(raw json.RawMessage) any {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	return v
}

// JSONSchema is the model's JSON schema as pydantic's model_json_schema
// writes it: keys sorted, properties in declaration order.
func (m *Model) JSONSchema() map[string]any {
	props := orderedProps{}
	var required []string
	for _, f := range m.Fields {
		props = append(props, prop{f.Name, f.schema()})
		if f.Required {
			required = append(required, f.Name)
		}
	}
	s := map[string]any{"title": m.Title, "type": "object", "properties": props}
	if m.Description != "" {
		s["description"] = m.Description
	}
	s["additionalProperties"] = m.AllowExtra
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func (f *Field) schema() map[string]any {
	s := map[string]any{}
	for k, v := range f.Schema {
		s[k] = v
	}
	if f.Schema == nil {
		t := map[string]any{}
		switch f.Kind {
		case Object:
			t["type"], t["additionalProperties"] = "object", true
		case Any:
		default:
			t["type"] = string(f.Kind)
		}
		if f.MaxLength > 0 {
			t["maxLength"] = f.MaxLength
		}
		if f.GE != nil {
			t["minimum"] = bound(*f.GE, f.Kind)
		}
		if f.GT != nil {
			t["exclusiveMinimum"] = bound(*f.GT, f.Kind)
		}
		if f.Nullable {
			s["anyOf"] = []any{t, map[string]any{"type": "null"}}
		} else {
			for k, v := range t {
				s[k] = v
			}
		}
	}
	s["title"] = title(f.Name)
	if f.Description != "" {
		s["description"] = f.Description
	}
	if !f.Required && !f.Factory {
		s["default"] = f.Default
	}
	return s
}

// title is pydantic's default field title: "action_type" -> "Action Type".
func title(name string) string {
	words := strings.Split(name, "_")
	for i, w := range words {
		if w != "" {
			words[i] = strings.ToUpper(w[:1]) + w[1:]
		}
	}
	return strings.Join(words, " ")
}

type prop struct {
	name   string
	schema map[string]any
}

// orderedProps keeps properties in declaration order when marshalled.
type orderedProps []prop

func (p orderedProps) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, pr := range p {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(pr.name)
		v, err := json.Marshal(pr.schema)
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
