package jinja

import (
	"math"
	"strconv"
)

// Kind is the runtime type of a Value, one per runtime value class of the
// reference engine.
type Kind uint8

// The kinds. Int and Float are Python's int and float: an Int keeps its
// exact int64 beside the float64 that arithmetic uses.
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
	i    int64 // an Int's exact value, when n holds it (see intString)
	s    string
	arr  *list
	obj  *Map
	fn   *function
}

type list struct{ items []Value }

// Map is an insertion-ordered string-keyed mapping (a Python dict).
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
func IntValue(n int64) Value      { return Value{kind: Int, n: float64(n), i: n} }
func FloatValue(f float64) Value  { return Value{kind: Float, n: f} }
func StringValue(s string) Value  { return Value{kind: String, s: s} }
func numberValue(f float64) Value { return Value{kind: numberKind(f), n: f, i: int64(f)} }

// numberKind is the kind of a computed number that has no kind of its own
// (built-ins such as range and length): Int when integral.
func numberKind(f float64) Kind {
	if !math.IsInf(f, 0) && !math.IsNaN(f) && f == math.Trunc(f) {
		return Int
	}
	return Float
}

// intValueOf is the int a literal or JSON integer spells; past int64 it
// keeps the digits to print (Python's ints are exact) and computes with the
// nearest float.
func intValueOf(digits string, f float64) Value {
	if i, err := strconv.ParseInt(digits, 10, 64); err == nil {
		return IntValue(i)
	}
	return Value{kind: Int, n: f, s: digits}
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

// toString is str(v): how a value prints in output.
func (v Value) toString() (string, error) { return v.pyStr() }
