package jinja

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// stringBuiltin is a string's attribute: its methods and length. Anything
// else is undefined (Python has find, count, format, join: see doc.go).
func stringBuiltin(s, name string) Value {
	switch name {
	case "length":
		return IntValue(int64(utf8.RuneCountInString(s)))
	case "upper", "lower", "strip", "title", "capitalize", "rstrip", "lstrip", "startswith", "endswith", "split", "replace":
		return Value{kind: Func, fn: &function{call: func(args []Value, _ *env) (Value, error) {
			return stringMethod(s, name, args)
		}}}
	}
	return UndefinedValue
}

func stringMethod(s, name string, args []Value) (Value, error) {
	switch name {
	case "length":
		return IntValue(int64(utf8.RuneCountInString(s))), nil
	case "upper":
		return StringValue(jsUpper(s)), nil
	case "lower":
		return StringValue(jsLower(s)), nil
	case "strip", "lstrip", "rstrip":
		var chars *string
		if len(args) > 0 && args[0].kind == String {
			chars = &args[0].s
		} else if len(args) > 0 && args[0].kind != Null {
			return Value{}, fmt.Errorf("jinja: %s arg must be None or str", name)
		}
		return StringValue(pyStrip(s, chars, name != "rstrip", name != "lstrip")), nil
	case "title":
		return StringValue(pyTitle(s)), nil
	case "capitalize":
		return StringValue(pyCapitalize(s)), nil
	case "startswith", "endswith":
		if len(args) == 0 {
			return Value{}, fmt.Errorf("jinja: %s() requires at least one argument", name)
		}
		has := strings.HasPrefix
		if name == "endswith" {
			has = strings.HasSuffix
		}
		p := args[0]
		switch {
		case p.kind == String:
			return BoolValue(has(s, p.s)), nil
		case p.isArray():
			for _, it := range p.arr.items {
				if it.kind != String {
					return Value{}, fmt.Errorf("jinja: %s() tuple elements must be strings", name)
				}
				if has(s, it.s) {
					return BoolValue(true), nil
				}
			}
			return BoolValue(false), nil
		}
		return Value{}, fmt.Errorf("jinja: %s() argument must be a string or tuple of strings", name)
	case "split":
		return split(s, args)
	case "replace":
		return replace(s, args)
	}
	return UndefinedValue, nil
}

func split(s string, args []Value) (Value, error) {
	sep := NullValue
	if len(args) > 0 {
		sep = args[0]
	}
	if sep.kind != String && sep.kind != Null {
		return Value{}, errors.New("jinja: sep argument must be a string or null")
	}
	maxsplit := IntValue(-1)
	if len(args) > 1 {
		maxsplit = args[1]
	}
	if maxsplit.kind != Int {
		return Value{}, errors.New("jinja: maxsplit argument must be a number")
	}
	limit := int(maxsplit.n)
	var parts []string
	if sep.kind == Null {
		text := strings.TrimLeftFunc(s, pyIsSpace)
		for i := 0; i < len(text); {
			r, n := decodeRune(text[i:])
			if pyIsSpace(r) {
				i += n
				continue
			}
			j := i
			for j < len(text) {
				r, n := decodeRune(text[j:])
				if pyIsSpace(r) {
					break
				}
				j += n
			}
			if limit >= 0 && len(parts) >= limit {
				parts = append(parts, text[i:])
				break
			}
			parts = append(parts, text[i:j])
			i = j
		}
	} else {
		if sep.s == "" {
			return Value{}, errors.New("jinja: empty separator")
		}
		parts = strings.Split(s, sep.s)
		if limit >= 0 && len(parts) > limit {
			// maxsplit: a negative one is no limit
			rest := strings.Join(parts[limit:], sep.s)
			parts = append(parts[:limit:limit], rest)
		}
	}
	out := make([]Value, len(parts))
	for i, p := range parts {
		out[i] = StringValue(p)
	}
	return ListValue(out), nil
}

func replace(s string, args []Value) (Value, error) {
	if len(args) < 2 {
		return Value{}, errors.New("jinja: replace() requires at least two arguments")
	}
	old, repl := args[0], args[1]
	if old.kind != String || repl.kind != String {
		return Value{}, errors.New("jinja: replace() arguments must be strings")
	}
	count := NullValue
	if len(args) > 2 {
		count = args[2]
		if count.kind == KwArgs {
			if c, ok := count.obj.Get("count"); ok {
				count = c
			} else {
				count = NullValue
			}
		}
	}
	if count.kind != Int && count.kind != Null {
		return Value{}, errors.New("jinja: replace() count argument must be a number or null")
	}
	n := -1
	if count.kind == Int {
		if count.n == 0 {
			return StringValue(s), nil
		}
		if count.n > 0 {
			n = int(math.Min(count.n, math.MaxInt32))
		}
	}
	if old.s != "" {
		return StringValue(strings.Replace(s, old.s, repl.s, n)), nil
	}
	// An empty pattern matches before every code point and at the end.
	var b strings.Builder
	left := n
	for _, r := range s {
		if left != 0 {
			b.WriteString(repl.s)
			left--
		}
		b.WriteRune(r)
	}
	if left != 0 {
		b.WriteString(repl.s)
	}
	return StringValue(b.String()), nil
}

// objectBuiltin is a mapping's method, undefined when it has none.
func objectBuiltin(o Value, name string) Value {
	m := o.obj
	fn := func(f func(args []Value) (Value, error)) Value {
		return Value{kind: Func, fn: &function{call: func(args []Value, _ *env) (Value, error) { return f(args) }}}
	}
	pairs := func() []Value {
		out := make([]Value, len(m.keys))
		for i, k := range m.keys {
			out[i] = tupleValue([]Value{StringValue(k), m.vals[k]})
		}
		return out
	}
	switch name {
	case "get":
		return fn(func(args []Value) (Value, error) {
			if len(args) == 0 || args[0].kind != String {
				return Value{}, errors.New("jinja: object key must be a string")
			}
			if v, ok := m.Get(args[0].s); ok {
				return v, nil
			}
			if len(args) > 1 {
				return args[1], nil
			}
			return NullValue, nil
		})
	case "items":
		return fn(func([]Value) (Value, error) { return ListValue(pairs()), nil })
	case "keys":
		return fn(func([]Value) (Value, error) {
			out := make([]Value, len(m.keys))
			for i, k := range m.keys {
				out[i] = StringValue(k)
			}
			return ListValue(out), nil
		})
	case "values":
		return fn(func([]Value) (Value, error) {
			out := make([]Value, len(m.keys))
			for i, k := range m.keys {
				out[i] = m.vals[k]
			}
			return ListValue(out), nil
		})
	case "dictsort":
		return fn(func(args []Value) (Value, error) {
			kw := NewMap()
			var pos []Value
			for _, a := range args {
				if a.kind == KwArgs {
					kw = a.obj
					continue
				}
				pos = append(pos, a)
			}
			caseSens := arg(pos, 0, kw, "case_sensitive", BoolValue(false))
			by := arg(pos, 1, kw, "by", StringValue("key"))
			reverse := arg(pos, 2, kw, "reverse", BoolValue(false))
			if caseSens.kind != Bool || reverse.kind != Bool {
				return Value{}, errors.New("jinja: case_sensitive and reverse must be booleans")
			}
			if by.kind != String || (by.s != "key" && by.s != "value") {
				return Value{}, errors.New("jinja: by must be either 'key' or 'value'")
			}
			idx := "0"
			if by.s == "value" {
				idx = "1"
			}
			return sortValues(pairs(), reverse.b, caseSens.b, &idx)
		})
	}
	return UndefinedValue
}

type testFunc func(v Value, second *Value) (bool, error)

var tests map[string]testFunc

func init() {
	is := func(f func(Value) bool) testFunc { return func(v Value, _ *Value) (bool, error) { return f(v), nil } }
	parity := func(name string, want float64) testFunc {
		return func(v Value, _ *Value) (bool, error) {
			if v.kind != Int {
				return false, fmt.Errorf("jinja: cannot %s on %s", name, v.kind)
			}
			return (math.Mod(v.n, 2) != 0) == (want != 0), nil
		}
	}
	equal := func(v Value, b *Value) (bool, error) {
		if b == nil {
			return false, errors.New("jinja: the equalto test needs a value")
		}
		return pyEq(v, *b), nil
	}
	tests = map[string]testFunc{
		"boolean":   is(func(v Value) bool { return v.kind == Bool }),
		"callable":  is(func(v Value) bool { return v.kind == Func }),
		"odd":       parity("odd", 1),
		"even":      parity("even", 0),
		"false":     is(func(v Value) bool { return v.kind == Bool && !v.b }),
		"true":      is(func(v Value) bool { return v.kind == Bool && v.b }),
		"none":      is(func(v Value) bool { return v.kind == Null }),
		"string":    is(func(v Value) bool { return v.kind == String }),
		"number":    is(func(v Value) bool { return v.isNumber() }),
		"integer":   is(func(v Value) bool { return v.kind == Int }),
		"float":     is(func(v Value) bool { return v.kind == Float }),
		"iterable":  is(func(v Value) bool { return v.kind == Array || v.kind == String }),
		"mapping":   is(func(v Value) bool { return v.isObject() }),
		"sequence":  is(func(v Value) bool { return v.isArray() || v.isObject() || v.kind == String }),
		"lower":     is(func(v Value) bool { return v.kind == String && v.s == jsLower(v.s) }),
		"upper":     is(func(v Value) bool { return v.kind == String && v.s == jsUpper(v.s) }),
		"defined":   is(func(v Value) bool { return v.kind != Undefined }),
		"undefined": is(func(v Value) bool { return v.kind == Undefined }),
		"equalto":   equal,
		"eq":        equal,
	}
}

// globals are the variables every render starts with.
func globals() map[string]Value {
	fn := func(f func(args []Value) (Value, error)) Value {
		return Value{kind: Func, fn: &function{call: func(args []Value, _ *env) (Value, error) { return f(args) }}}
	}
	return map[string]Value{
		"namespace": fn(namespace),
		"false":     BoolValue(false), "true": BoolValue(true), "none": NullValue,
		"False": BoolValue(false), "True": BoolValue(true), "None": NullValue,
		"raise_exception": fn(func(args []Value) (Value, error) {
			msg := "undefined"
			if len(args) > 0 {
				msg, _ = args[0].pyStr()
			}
			return Value{}, fmt.Errorf("jinja: raise_exception: %s", msg)
		}),
		"range":        fn(rangeFunc),
		"strftime_now": fn(strftimeNow),
	}
}

func namespace(args []Value) (Value, error) {
	pos := args
	var kw *Map
	if n := len(pos); n > 0 && pos[n-1].kind == KwArgs {
		kw, pos = pos[n-1].obj, pos[:n-1]
	}
	if len(pos) > 1 {
		return Value{}, fmt.Errorf("jinja: namespace expected at most 1 argument, got %d", len(pos))
	}
	m := NewMap()
	if len(pos) == 1 {
		src := pos[0]
		switch {
		case src.isObject():
			for _, k := range src.obj.keys {
				m.Set(k, src.obj.vals[k])
			}
		case src.isArray():
			for _, pair := range src.arr.items {
				var kv []Value
				switch {
				case pair.isArray():
					kv = pair.arr.items
				case pair.kind == String:
					for _, r := range pair.s {
						kv = append(kv, StringValue(string(r)))
					}
				}
				if len(kv) != 2 {
					return Value{}, errors.New("jinja: namespace expected an object or an iterable of [key, value] pairs")
				}
				if kv[0].kind != String {
					return Value{}, errors.New("jinja: namespace keys must be strings")
				}
				m.Set(kv[0].s, kv[1])
			}
		default:
			return Value{}, fmt.Errorf("jinja: '%s' object is not iterable", src.kind)
		}
	}
	if kw != nil {
		for _, k := range kw.keys {
			m.Set(k, kw.vals[k])
		}
	}
	return Value{kind: Namespace, obj: m}, nil
}

// maxRange bounds range() so that a template cannot allocate without limit.
const maxRange = 1 << 20

func rangeFunc(args []Value) (Value, error) {
	nums := make([]float64, 0, 3)
	for _, a := range args {
		if !a.isNumber() {
			return Value{}, errors.New("jinja: range() arguments must be numbers")
		}
		nums = append(nums, a.n)
	}
	var start, stop, step float64 = 0, 0, 1
	switch len(nums) {
	case 0:
		return Value{}, errors.New("jinja: range() needs an argument")
	case 1:
		stop = nums[0]
	case 2:
		start, stop = nums[0], nums[1]
	default:
		start, stop, step = nums[0], nums[1], nums[2]
	}
	if step == 0 {
		return Value{}, errors.New("jinja: range() step must not be zero")
	}
	var out []Value
	for i := start; (step > 0 && i < stop) || (step < 0 && i > stop); i += step {
		if len(out) >= maxRange {
			return Value{}, errors.New("jinja: range() too large")
		}
		out = append(out, numberValue(i))
	}
	return ListValue(out), nil
}

func strftimeNow(args []Value) (Value, error) {
	if len(args) == 0 || args[0].kind != String {
		return Value{}, errors.New("jinja: strftime_now needs a format string")
	}
	now := time.Now()
	var b strings.Builder
	f := args[0].s
	for i := 0; i < len(f); i++ {
		if f[i] != '%' || i+1 >= len(f) {
			b.WriteByte(f[i])
			continue
		}
		switch f[i+1] {
		case 'Y':
			fmt.Fprintf(&b, "%d", now.Year())
		case 'm':
			fmt.Fprintf(&b, "%02d", int(now.Month()))
		case 'd':
			fmt.Fprintf(&b, "%02d", now.Day())
		case 'b':
			b.WriteString(now.Month().String()[:3])
		case 'B':
			b.WriteString(now.Month().String())
		case 'H':
			fmt.Fprintf(&b, "%02d", now.Hour())
		case 'M':
			fmt.Fprintf(&b, "%02d", now.Minute())
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(f[i+1])
		}
		i++
	}
	return StringValue(b.String()), nil
}
