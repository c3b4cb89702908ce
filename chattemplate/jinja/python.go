package jinja

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// This file holds the Python semantics that Python jinja2 inherits from its
// host language and that a chat template's output shows: str() and repr()
// of values, float repr, json.dumps (transformers' tojson) and ==.

// pyStr is str(v): how a value prints in output and through "~".
func (v Value) pyStr() (string, error) {
	switch v.kind {
	case Undefined:
		return "", nil
	case String:
		return v.s, nil
	}
	var b strings.Builder
	err := writeRepr(&b, v, 0)
	return b.String(), err
}

// writeRepr writes repr(v); containers print their items' repr.
func writeRepr(b *strings.Builder, v Value, depth int) error {
	if depth > MaxJSONDepth {
		return errors.New("jinja: value nested too deeply to print")
	}
	switch v.kind {
	case Undefined:
		b.WriteString("Undefined")
	case Null:
		b.WriteString("None")
	case Bool:
		b.WriteString(map[bool]string{true: "True", false: "False"}[v.b])
	case Int:
		b.WriteString(v.intString())
	case Float:
		b.WriteString(pyFloat(v.n))
	case String:
		writePyString(b, v.s)
	case Array, Tuple:
		open, end := "[", "]"
		if v.kind == Tuple {
			open, end = "(", ")"
		}
		b.WriteString(open)
		for i, it := range v.arr.items {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := writeRepr(b, it, depth+1); err != nil {
				return err
			}
		}
		if v.kind == Tuple && len(v.arr.items) == 1 {
			b.WriteByte(',')
		}
		b.WriteString(end)
	case Object, KwArgs, Namespace:
		if v.kind == Namespace {
			b.WriteString("<Namespace ")
		}
		b.WriteByte('{')
		for i, k := range v.obj.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			writePyString(b, k)
			b.WriteString(": ")
			if err := writeRepr(b, v.obj.vals[k], depth+1); err != nil {
				return err
			}
		}
		b.WriteByte('}')
		if v.kind == Namespace {
			b.WriteByte('>')
		}
	default:
		return fmt.Errorf("jinja: cannot convert %s to a string", v.kind)
	}
	return nil
}

// intString prints an integer exactly when it came in as one (a JSON or
// literal integer keeps its digits, past 2^53 and past int64 too), else
// from its float.
func (v Value) intString() string {
	if v.s != "" {
		return v.s
	}
	if float64(v.i) == v.n {
		return strconv.FormatInt(v.i, 10)
	}
	return strconv.FormatFloat(v.n, 'f', 0, 64)
}

// pyFloat is repr(float): the shortest round-trip digits, in exponent form
// when the decimal point would sit more than 16 places right or 4 left of
// them, and ".0" on integral values.
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // [-]d.ddde±XX
	sign := ""
	if e[0] == '-' {
		sign, e = "-", e[1:]
	}
	mant, expPart, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	exp, _ := strconv.Atoi(expPart)
	decpt := exp + 1
	switch {
	case decpt <= -4 || decpt > 16:
		s := digits[:1]
		if len(digits) > 1 {
			s += "." + digits[1:]
		}
		esign := "+"
		if exp < 0 {
			esign, exp = "-", -exp
		}
		return fmt.Sprintf("%s%se%s%02d", sign, s, esign, exp)
	case decpt <= 0:
		return sign + "0." + strings.Repeat("0", -decpt) + digits
	case decpt >= len(digits):
		return sign + digits + strings.Repeat("0", decpt-len(digits)) + ".0"
	}
	return sign + digits[:decpt] + "." + digits[decpt:]
}

// writePyString is repr(str): single quotes unless the text has a single
// quote and no double one; unprintable characters escaped as \x, \u, \U.
func writePyString(b *strings.Builder, s string) {
	quote := '\''
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		quote = '"'
	}
	b.WriteRune(quote)
	for _, r := range s {
		switch {
		case r == quote || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(b, `\x%02x`, r)
		case r < 0x7f || unicode.IsPrint(r): // Go's IsPrint is Python's isprintable
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(b, `\x%02x`, r)
		case r < 0x10000:
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			fmt.Fprintf(b, `\U%08x`, r)
		}
	}
	b.WriteRune(quote)
}

// jsonOptions are json.dumps's: indent (nil: one line), separators,
// ensure_ascii and sort_keys.
type jsonOptions struct {
	indent      *string
	ensureASCII bool
	sortKeys    bool
	seps        *[2]string
}

// pyJSON is json.dumps(v, ...) as transformers' tojson filter calls it.
func pyJSON(v Value, o jsonOptions) (string, error) {
	itemSep, keySep := ", ", ": "
	if o.indent != nil {
		itemSep = ","
	}
	if o.seps != nil {
		itemSep, keySep = o.seps[0], o.seps[1]
	}
	var b strings.Builder
	err := writePyJSON(&b, v, o, itemSep, keySep, 0)
	return b.String(), err
}

func writePyJSON(b *strings.Builder, v Value, o jsonOptions, itemSep, keySep string, depth int) error {
	if depth > MaxJSONDepth {
		return errors.New("jinja: value nested too deeply for JSON")
	}
	newline := func(d int) {
		if o.indent != nil {
			b.WriteByte('\n')
			b.WriteString(strings.Repeat(*o.indent, d))
		}
	}
	switch v.kind {
	case Null:
		b.WriteString("null")
	case Bool:
		b.WriteString(map[bool]string{true: "true", false: "false"}[v.b])
	case Int:
		b.WriteString(v.intString())
	case Float:
		switch {
		case math.IsNaN(v.n):
			b.WriteString("NaN")
		case math.IsInf(v.n, 1):
			b.WriteString("Infinity")
		case math.IsInf(v.n, -1):
			b.WriteString("-Infinity")
		default:
			b.WriteString(pyFloat(v.n))
		}
	case String:
		writeJSONString(b, v.s, o.ensureASCII)
	case Array, Tuple:
		if len(v.arr.items) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, it := range v.arr.items {
			if i > 0 {
				b.WriteString(itemSep)
			}
			newline(depth + 1)
			if err := writePyJSON(b, it, o, itemSep, keySep, depth+1); err != nil {
				return err
			}
		}
		newline(depth)
		b.WriteByte(']')
	case Object, KwArgs:
		keys := v.obj.keys
		if len(keys) == 0 {
			b.WriteString("{}")
			return nil
		}
		if o.sortKeys {
			keys = slices.Sorted(slices.Values(keys)) // byte order is code-point order
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(itemSep)
			}
			newline(depth + 1)
			writeJSONString(b, k, o.ensureASCII)
			b.WriteString(keySep)
			if err := writePyJSON(b, v.obj.vals[k], o, itemSep, keySep, depth+1); err != nil {
				return err
			}
		}
		newline(depth)
		b.WriteByte('}')
	default:
		return fmt.Errorf("jinja: object of type %s is not JSON serializable", v.kind)
	}
	return nil
}

// pyNumber reports v as a Python number (bool is an int there).
func pyNumber(v Value) (float64, bool) {
	switch v.kind {
	case Int, Float:
		return v.n, true
	case Bool:
		return boolNum(v.b), true
	}
	return 0, false
}

// pyEq is Python's ==: numbers by value across int, float and bool; lists
// and mappings by their contents; a list never equals a tuple; Undefined
// equals only Undefined.
func pyEq(a, b Value) bool {
	if x, ok := pyNumber(a); ok {
		y, ok := pyNumber(b)
		if ok && (a.kind == Int && b.kind == Int) {
			return a.intString() == b.intString()
		}
		return ok && x == y
	}
	if a.kind != b.kind && !(a.isObject() && b.isObject()) {
		return false
	}
	switch a.kind {
	case Undefined, Null:
		return true
	case String:
		return a.s == b.s
	case Array, Tuple:
		if len(a.arr.items) != len(b.arr.items) {
			return false
		}
		for i := range a.arr.items {
			if !pyEq(a.arr.items[i], b.arr.items[i]) {
				return false
			}
		}
		return true
	case Object, KwArgs, Namespace:
		if a.obj == b.obj {
			return true
		}
		if a.kind == Namespace || a.obj.Len() != b.obj.Len() {
			return false
		}
		for _, k := range a.obj.keys {
			bv, ok := b.obj.Get(k)
			if !ok || !pyEq(a.obj.vals[k], bv) {
				return false
			}
		}
		return true
	case Func:
		return a.fn == b.fn
	}
	return false
}
