package jinja

import (
	"fmt"
	"math"
	"strings"
)

// Kind is the runtime type of a Value, one per runtime value class of the
// reference engine.
type Kind uint8

// The kinds. Int and Float are both JavaScript numbers (float64); the kind
// only changes how they print and what arithmetic returns.
const (
	Undefined Kind = iota
	Null
	Bool
	Int
	Float
	String
	Array
	Tuple
	Object
	KwArgs
	Namespace
	Func
)

var kindNames = [...]string{"UndefinedValue", "NullValue", "BooleanValue", "IntegerValue", "FloatValue",
	"StringValue", "ArrayValue", "TupleValue", "ObjectValue", "KeywordArgumentsValue", "NamespaceValue", "FunctionValue"}

func (k Kind) String() string { return kindNames[k] }

// Value is a template value. The zero Value is Undefined.
type Value struct {
	kind Kind
	b    bool
	n    float64
	s    string
	arr  *list
	obj  *Map
	fn   *function
}

type list struct{ items []Value }

// Map is an insertion-ordered string-keyed mapping (a JavaScript Map).
type Map struct {
	keys []string
	vals map[string]Value
}

type function struct {
	call func(args []Value, env *env) (Value, error)
}

// Constructors for values a caller passes in.
var (
	UndefinedValue = Value{}
	NullValue      = Value{kind: Null}
)

// BoolValue, IntValue, FloatValue and StringValue wrap Go scalars.
func BoolValue(b bool) Value      { return Value{kind: Bool, b: b} }
func IntValue(n int64) Value      { return Value{kind: Int, n: float64(n)} }
func FloatValue(f float64) Value  { return Value{kind: Float, n: f} }
func StringValue(s string) Value  { return Value{kind: String, s: s} }
func numberValue(f float64) Value { return Value{kind: numberKind(f), n: f} }

// numberKind is what the reference picks for a JavaScript number it is
// given: IntegerValue when Number.isInteger, else FloatValue.
func numberKind(f float64) Kind {
	if !math.IsInf(f, 0) && !math.IsNaN(f) && f == math.Trunc(f) {
		return Int
	}
	return Float
}

// ListValue makes an Array of items (not copied).
func ListValue(items []Value) Value { return Value{kind: Array, arr: &list{items}} }

func tupleValue(items []Value) Value { return Value{kind: Tuple, arr: &list{items}} }

// NewMap returns an empty ordered mapping.
func NewMap() *Map { return &Map{vals: map[string]Value{}} }

// Set adds or replaces key; a replaced key keeps its position.
func (m *Map) Set(key string, v Value) {
	if _, ok := m.vals[key]; !ok {
		m.keys = append(m.keys, key)
	}
	m.vals[key] = v
}

// Get returns the value of key.
func (m *Map) Get(key string) (Value, bool) {
	v, ok := m.vals[key]
	return v, ok
}

func (m *Map) delete(key string) {
	if _, ok := m.vals[key]; !ok {
		return
	}
	delete(m.vals, key)
	for i, k := range m.keys {
		if k == key {
			m.keys = append(m.keys[:i:i], m.keys[i+1:]...)
			break
		}
	}
}

// Len is the number of keys.
func (m *Map) Len() int { return len(m.keys) }

func (m *Map) clone() *Map {
	c := &Map{keys: append([]string(nil), m.keys...), vals: make(map[string]Value, len(m.vals))}
	for k, v := range m.vals {
		c.vals[k] = v
	}
	return c
}

// ObjectValue wraps m as a mapping.
func ObjectValue(m *Map) Value { return Value{kind: Object, obj: m} }

// Kind reports v's kind.
func (v Value) Kind() Kind { return v.kind }

// Str returns the string of a String value.
func (v Value) Str() string { return v.s }

// Items returns the items of an Array or Tuple.
func (v Value) Items() []Value {
	if v.arr == nil {
		return nil
	}
	return v.arr.items
}

// Map returns the mapping of an Object, KwArgs or Namespace value.
func (v Value) Map() *Map { return v.obj }

func (v Value) isArray() bool  { return v.kind == Array || v.kind == Tuple }
func (v Value) isObject() bool { return v.kind == Object || v.kind == KwArgs }
func (v Value) isNumber() bool { return v.kind == Int || v.kind == Float }

// attrContainer is the reference's isAttributeContainer: mappings and
// namespaces.
func (v Value) attrContainer() bool { return v.isObject() || v.kind == Namespace }

// truthy is the reference's __bool__.
func (v Value) truthy() bool {
	switch v.kind {
	case Undefined, Null:
		return false
	case Bool:
		return v.b
	case Int, Float:
		return v.n != 0 && !math.IsNaN(v.n)
	case String:
		return v.s != ""
	case Array, Tuple:
		return len(v.arr.items) > 0
	case Object, KwArgs:
		return v.obj.Len() > 0
	}
	return true // namespaces and functions
}

// toString is RuntimeValue.toString(): how a value prints in output.
func (v Value) toString() (string, error) {
	switch v.kind {
	case Undefined:
		return "undefined", nil
	case Null:
		return "null", nil
	case Bool:
		if v.b {
			return "true", nil
		}
		return "false", nil
	case Int:
		return jsNumber(v.n), nil
	case Float:
		if v.n == 0 && math.Signbit(v.n) {
			return "-0.0", nil
		}
		if !math.IsInf(v.n, 0) && !math.IsNaN(v.n) && v.n == math.Trunc(v.n) {
			return jsToFixed1(v.n), nil
		}
		return jsNumber(v.n), nil
	case String:
		return v.s, nil
	case Array, Tuple, Object, Namespace:
		return toJSON(v, jsonOptions{}, 0, false)
	}
	return "", fmt.Errorf("jinja: cannot convert %s to a string", v.kind)
}

// jsString is JavaScript's String(x.value): the conversion that "~" and
// string "+" apply to the wrapped values, not to the runtime values.
func (v Value) jsString() (string, error) {
	switch v.kind {
	case Int, Float:
		return jsNumber(v.n), nil
	case Array, Tuple:
		// Array.prototype.toString joins its elements, which are runtime
		// values, with their own toString.
		parts := make([]string, len(v.arr.items))
		for i, it := range v.arr.items {
			s, err := it.toString()
			if err != nil {
				return "", err
			}
			parts[i] = s
		}
		return strings.Join(parts, ","), nil
	case Object, KwArgs, Namespace:
		return "[object Map]", nil
	case Func:
		return "", fmt.Errorf("jinja: cannot convert a function to a string")
	}
	return v.toString()
}

type jsonOptions struct {
	indent      int // 0: none
	ensureASCII bool
	sortKeys    bool
	itemSep     string
	keySep      string
	seps        bool
}

// toJSON is the reference's toJSON: Python-style separators, JavaScript
// string and number formatting.
func toJSON(v Value, o jsonOptions, depth int, undefinedToNull bool) (string, error) {
	var b strings.Builder
	if err := writeJSON(&b, v, o, depth, undefinedToNull); err != nil {
		return "", err
	}
	return b.String(), nil
}

func writeJSON(b *strings.Builder, v Value, o jsonOptions, depth int, undefinedToNull bool) error {
	itemSep, keySep := ", ", ": "
	if o.seps {
		itemSep, keySep = o.itemSep, o.keySep
	} else if o.indent > 0 {
		itemSep = ","
	}
	switch v.kind {
	case Null:
		b.WriteString("null")
	case Undefined:
		if undefinedToNull {
			b.WriteString("null")
		} else {
			b.WriteString("undefined")
		}
	case Int, Float:
		if math.IsInf(v.n, 0) || math.IsNaN(v.n) {
			b.WriteString("null")
		} else {
			b.WriteString(jsNumber(v.n))
		}
	case Bool:
		if v.b {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case String:
		writeJSONString(b, v.s, o.ensureASCII)
	case Array, Tuple, Object, Namespace:
		pad := strings.Repeat(" ", o.indent)
		base := "\n" + strings.Repeat(pad, depth)
		child := base + pad
		if v.isArray() {
			items := v.arr.items
			b.WriteByte('[')
			if o.indent > 0 && len(items) > 0 {
				b.WriteString(child)
			}
			for i, it := range items {
				if i > 0 {
					b.WriteString(itemSep)
					if o.indent > 0 {
						b.WriteString(child)
					}
				}
				if err := writeJSON(b, it, o, depth+1, undefinedToNull); err != nil {
					return err
				}
			}
			if o.indent > 0 && len(items) > 0 {
				b.WriteString(base)
			}
			b.WriteByte(']')
			return nil
		}
		keys := v.obj.keys
		if o.sortKeys {
			keys = sortedByLocale(keys)
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(itemSep)
			}
			if o.indent > 0 {
				b.WriteString(child)
			}
			writeJSONString(b, k, o.ensureASCII)
			b.WriteString(keySep)
			if err := writeJSON(b, v.obj.vals[k], o, depth+1, undefinedToNull); err != nil {
				return err
			}
		}
		if o.indent > 0 && len(keys) > 0 {
			b.WriteString(base)
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("jinja: cannot convert to JSON: %s", v.kind)
	}
	return nil
}
