package jinja

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// Template is a compiled template. It is immutable and safe for concurrent
// Render calls.
type Template struct {
	body []node
}

// MaxTemplateBytes bounds a template's source.
const MaxTemplateBytes = 1 << 20

// Compile lexes and parses src as the reference's Template constructor does
// (lstrip_blocks and trim_blocks on).
func Compile(src string) (*Template, error) {
	if len(src) > MaxTemplateBytes {
		return nil, fmt.Errorf("jinja: template of %d bytes exceeds %d", len(src), MaxTemplateBytes)
	}
	toks, err := tokenize(src)
	if err != nil {
		return nil, err
	}
	body, err := parse(toks)
	if err != nil {
		return nil, err
	}
	return &Template{body: body}, nil
}

// Render renders the template with vars as its top-level variables. As in
// the reference, a variable may not shadow a global (true, none, range,
// namespace, ...).
func (t *Template) Render(vars map[string]Value) (string, error) {
	root := newEnv(nil)
	root.vars = globals()
	names := make([]string, 0, len(vars))
	for k := range vars {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if _, dup := root.vars[k]; dup {
			return "", fmt.Errorf("jinja: variable already declared: %s", k)
		}
		root.vars[k] = vars[k]
	}
	in := &interp{}
	out, err := in.block(t.body, root)
	switch {
	case errors.Is(err, errBreak), errors.Is(err, errContinue):
		return "", err
	case err != nil:
		return "", err
	}
	return out.s, nil
}

// MaxJSONDepth bounds the nesting of values decoded by FromJSON.
const MaxJSONDepth = 64

// FromJSON decodes one JSON value the way Python's json.loads does:
// integers are ints and numbers with a fraction or exponent floats, and an
// object's keys keep their document order (a repeated key keeps its first
// position and its last value).
func FromJSON(data []byte) (Value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return Value{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return Value{}, errors.New("jinja: trailing data after JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder, depth int) (Value, error) {
	if depth > MaxJSONDepth {
		return Value{}, errors.New("jinja: JSON nested too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		return Value{}, err
	}
	switch t := tok.(type) {
	case nil:
		return NullValue, nil
	case bool:
		return BoolValue(t), nil
	case string:
		return StringValue(t), nil
	case json.Number:
		// As json.loads: a literal with a fraction or exponent is a float
		// (1.0 stays 1.0), any other an int.
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return Value{}, err
		}
		if !strings.ContainsAny(string(t), ".eE") {
			return intValueOf(string(t), f), nil
		}
		return FloatValue(f), nil
	case json.Delim:
		if t == '[' {
			items := []Value{}
			for dec.More() {
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return Value{}, err
				}
				items = append(items, v)
			}
			_, err := dec.Token()
			return ListValue(items), err
		}
		m := NewMap()
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return Value{}, err
			}
			v, err := decodeValue(dec, depth+1)
			if err != nil {
				return Value{}, err
			}
			m.Set(kt.(string), v)
		}
		if _, err := dec.Token(); err != nil {
			return Value{}, err
		}
		return ObjectValue(m), nil
	}
	return Value{}, fmt.Errorf("jinja: unexpected JSON token %v", tok)
}
