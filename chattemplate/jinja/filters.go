package jinja

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

func (in *interp) applyFilter(operand Value, f node, e *env) (Value, error) {
	switch f := f.(type) {
	case identNode:
		return plainFilter(operand, f.name)
	case *callNode:
		id, ok := f.callee.(identNode)
		if !ok {
			return Value{}, errors.New("jinja: unknown filter")
		}
		return in.callFilter(operand, id.name, f.args, e)
	}
	return Value{}, errors.New("jinja: unknown filter")
}

// plainFilter is a filter written without arguments.
func plainFilter(v Value, name string) (Value, error) {
	switch name {
	case "safe":
		return v, nil
	case "tojson":
		s, err := pyJSON(v, jsonOptions{})
		return StringValue(s), err
	}
	switch {
	case v.isArray():
		items := v.arr.items
		switch name {
		case "list":
			return v, nil
		case "first", "last":
			if len(items) == 0 {
				return UndefinedValue, nil
			}
			if name == "first" {
				return items[0], nil
			}
			return items[len(items)-1], nil
		case "length":
			return IntValue(int64(len(items))), nil
		case "reverse":
			out := make([]Value, len(items))
			for i, it := range items {
				out[len(items)-1-i] = it
			}
			return ListValue(out), nil
		case "sort":
			return sortValues(items, false, false, nil)
		case "join":
			return joinValues(items, "")
		case "string":
			s, err := v.pyStr()
			return StringValue(s), err
		case "unique":
			var out []Value
			for _, it := range items {
				dup := false
				for _, o := range out {
					if pyEq(o, it) {
						dup = true
						break
					}
				}
				if !dup {
					out = append(out, it)
				}
			}
			return ListValue(out), nil
		}
		return Value{}, fmt.Errorf("jinja: unknown ArrayValue filter: %s", name)
	case v.kind == String:
		switch name {
		case "length", "upper", "lower", "capitalize":
			return stringMethod(v.s, name, nil)
		case "title":
			return StringValue(titleFilter(v.s)), nil
		case "trim":
			return StringValue(pyStrip(v.s, nil, true, true)), nil
		case "indent":
			return StringValue(indent(v.s, 4, false, false)), nil
		case "join", "string":
			return v, nil
		case "int", "float":
			return numberFilter(v, name, Value{}), nil
		}
		return Value{}, fmt.Errorf("jinja: unknown StringValue filter: %s", name)
	case v.isNumber():
		switch name {
		case "abs":
			return Value{kind: v.kind, n: math.Abs(v.n)}, nil
		case "int", "float":
			return numberFilter(v, name, Value{}), nil
		case "string":
			s, err := v.toString()
			return StringValue(s), err
		}
		return Value{}, fmt.Errorf("jinja: unknown NumericValue filter: %s", name)
	case v.isObject():
		switch name {
		case "items":
			return objectBuiltin(v, "items").fn.call(nil, nil)
		case "length":
			return IntValue(int64(v.obj.Len())), nil
		}
		b := objectBuiltin(v, name)
		if b.kind == Func {
			return b.fn.call(nil, nil)
		}
		if b.kind != Undefined {
			return b, nil
		}
		return Value{}, fmt.Errorf("jinja: unknown ObjectValue filter: %s", name)
	case v.kind == Bool:
		switch name {
		case "bool":
			return v, nil
		case "int", "float":
			return numberFilter(v, name, Value{}), nil
		case "string":
			s, _ := v.toString()
			return StringValue(s), nil
		}
		return Value{}, fmt.Errorf("jinja: unknown BooleanValue filter: %s", name)
	}
	return Value{}, fmt.Errorf("jinja: cannot apply filter %q to type: %s", name, v.kind)
}

func indent(s string, width int, first, blank bool) string {
	lines := strings.Split(s, "\n")
	pad := strings.Repeat(" ", width)
	for i, l := range lines {
		if (!first && i == 0) || (!blank && l == "") {
			continue
		}
		lines[i] = pad + l
	}
	return strings.Join(lines, "\n")
}

// joinValues is jinja2's join: str() of each item.
func joinValues(items []Value, sep string) (Value, error) {
	parts := make([]string, len(items))
	for i, it := range items {
		s, err := it.pyStr()
		if err != nil {
			return Value{}, err
		}
		parts[i] = s
	}
	return StringValue(strings.Join(parts, sep)), nil
}

func arg(args []Value, i int, kw *Map, name string, def Value) Value {
	if i < len(args) {
		return args[i]
	}
	if kw != nil {
		if v, ok := kw.Get(name); ok {
			return v
		}
	}
	return def
}

// callFilter is a filter written with arguments.
func (in *interp) callFilter(v Value, name string, argNodes []node, e *env) (Value, error) {
	args, kw, err := in.evalArgs(argNodes, e)
	if err != nil {
		return Value{}, err
	}
	switch name {
	case "tojson":
		return tojsonFilter(v, kw)
	case "join":
		var items []Value
		switch {
		case v.kind == String:
			for _, r := range v.s {
				items = append(items, StringValue(string(r)))
			}
		case v.isArray():
			items = v.arr.items
		default:
			return Value{}, fmt.Errorf("jinja: cannot apply filter %q to type: %s", name, v.kind)
		}
		sep := arg(args, 0, kw, "separator", StringValue(""))
		if sep.kind != String {
			return Value{}, errors.New("jinja: separator must be a string")
		}
		return joinValues(items, sep.s)
	case "int", "float":
		def := Value{kind: Int}
		if name == "float" {
			def = FloatValue(0)
		}
		return numberFilter(v, name, arg(args, 0, kw, "default", def)), nil
	case "default":
		def := StringValue("")
		if len(args) > 0 {
			def = args[0]
		}
		flag := arg(args, 1, kw, "boolean", BoolValue(false))
		if flag.kind != Bool {
			return Value{}, errors.New("jinja: `default` filter flag must be a boolean")
		}
		if v.kind == Undefined || (flag.b && !v.truthy()) {
			return def, nil
		}
		return v, nil
	}
	switch {
	case v.isArray():
		switch name {
		case "sort":
			reverse := arg(args, 0, kw, "reverse", BoolValue(false))
			caseSens := arg(args, 1, kw, "case_sensitive", BoolValue(false))
			attr := arg(args, 2, kw, "attribute", NullValue)
			if reverse.kind != Bool || caseSens.kind != Bool {
				return Value{}, errors.New("jinja: reverse and case_sensitive must be booleans")
			}
			var path *string
			switch attr.kind {
			case Null:
			case String:
				path = &attr.s
			case Int:
				s := attr.intString()
				path = &s
			default:
				return Value{}, errors.New("jinja: attribute must be a string, integer, or null")
			}
			return sortValues(v.arr.items, reverse.b, caseSens.b, path)
		case "selectattr", "rejectattr":
			return in.selectAttr(v, name == "selectattr", argNodes, e)
		case "map":
			attr, ok := kw.Get("attribute")
			if !ok {
				return mapFilter(v.arr.items, args)
			}
			if attr.kind != String {
				return Value{}, errors.New("jinja: attribute must be a string")
			}
			def, hasDef := kw.Get("default")
			out := make([]Value, len(v.arr.items))
			for i, it := range v.arr.items {
				if !it.attrContainer() {
					return Value{}, errors.New("jinja: items in map must be an object")
				}
				x := attrPath(it, attr.s)
				if x.kind == Undefined && hasDef {
					x = def
				}
				out[i] = x
			}
			return ListValue(out), nil
		}
		return Value{}, fmt.Errorf("jinja: unknown ArrayValue filter: %s", name)
	case v.kind == String:
		switch name {
		case "indent":
			width := arg(args, 0, kw, "width", IntValue(4))
			if width.kind != Int {
				return Value{}, errors.New("jinja: width must be a number")
			}
			first := arg(args, 1, kw, "first", BoolValue(false))
			blank := arg(args, 2, kw, "blank", BoolValue(false))
			return StringValue(indent(v.s, int(width.n), first.truthyJSValue(), blank.truthyJSValue())), nil
		case "replace":
			return stringMethod(v.s, "replace", append(args, Value{kind: KwArgs, obj: kw}))
		}
		return Value{}, fmt.Errorf("jinja: unknown StringValue filter: %s", name)
	case v.isObject():
		b := objectBuiltin(v, name)
		if b.kind == Func {
			if kw.Len() > 0 {
				args = append(args, Value{kind: KwArgs, obj: kw})
			}
			return b.fn.call(args, e)
		}
		return Value{}, fmt.Errorf("jinja: unknown ObjectValue filter: %s", name)
	}
	return Value{}, fmt.Errorf("jinja: cannot apply filter %q to type: %s", name, v.kind)
}

// truthyJSValue is JavaScript truthiness of the wrapped value (the
// reference tests first.value and blank.value, not __bool__).
func (v Value) truthyJSValue() bool {
	switch v.kind {
	case Array, Tuple, Object, KwArgs, Namespace, Func:
		return true
	}
	return v.truthy()
}

func tojsonFilter(v Value, kw *Map) (Value, error) {
	o := jsonOptions{}
	if ind, ok := kw.Get("indent"); ok && ind.kind != Null {
		// json.dumps: an int is that many spaces (0 and below: newlines
		// only), a string is the indent itself.
		var s string
		switch ind.kind {
		case Int:
			s = strings.Repeat(" ", max(0, int(ind.n)))
		case String:
			s = ind.s
		default:
			return Value{}, errors.New("jinja: if set, indent must be an int or a string")
		}
		o.indent = &s
	}
	if a, ok := kw.Get("ensure_ascii"); ok {
		if a.kind != Bool {
			return Value{}, errors.New("jinja: if set, ensure_ascii must be a boolean")
		}
		o.ensureASCII = a.b
	}
	if s, ok := kw.Get("sort_keys"); ok {
		if s.kind != Bool {
			return Value{}, errors.New("jinja: if set, sort_keys must be a boolean")
		}
		o.sortKeys = s.b
	}
	if seps, ok := kw.Get("separators"); ok && seps.kind != Null {
		if !seps.isArray() || len(seps.arr.items) != 2 || seps.arr.items[0].kind != String || seps.arr.items[1].kind != String {
			return Value{}, errors.New("jinja: separators must be a tuple of two strings")
		}
		o.seps = &[2]string{seps.arr.items[0].s, seps.arr.items[1].s}
	}
	s, err := pyJSON(v, o)
	return StringValue(s), err
}

func (in *interp) selectAttr(v Value, sel bool, argNodes []node, e *env) (Value, error) {
	for _, it := range v.arr.items {
		if !it.attrContainer() {
			return Value{}, errors.New("jinja: selectattr/rejectattr can only be applied to array of objects")
		}
	}
	vals := make([]Value, len(argNodes))
	for i, a := range argNodes {
		if _, ok := a.(textNode); !ok {
			return Value{}, errors.New("jinja: arguments of selectattr/rejectattr must be strings")
		}
		vals[i], _ = in.eval(a, e)
	}
	if len(vals) == 0 {
		return Value{}, errors.New("jinja: selectattr needs an attribute")
	}
	test := func(x Value, _ *Value) (bool, error) { return x.truthy(), nil }
	var second *Value
	if len(vals) > 2 {
		second = &vals[2]
	}
	if len(vals) > 1 {
		t, ok := tests[vals[1].s]
		if !ok {
			return Value{}, fmt.Errorf("jinja: unknown test: %s", vals[1].s)
		}
		test = t
	}
	var out []Value
	for _, it := range v.arr.items {
		a, present := it.obj.Get(vals[0].s)
		r := false
		if present {
			var err error
			if r, err = test(a, second); err != nil {
				return Value{}, err
			}
		}
		if r == sel {
			out = append(out, it)
		}
	}
	return ListValue(out), nil
}

// attrPath is the reference's getAttributeValue: dotted keys and indexes.
func attrPath(it Value, path string) Value {
	v := it
	for _, part := range strings.Split(path, ".") {
		switch {
		case v.attrContainer():
			x, ok := v.obj.Get(part)
			if !ok {
				return UndefinedValue
			}
			v = x
		case v.isArray():
			n, err := strconv.Atoi(part)
			if err != nil || n < 0 || n >= len(v.arr.items) {
				return UndefinedValue
			}
			v = v.arr.items[n]
		default:
			return UndefinedValue
		}
	}
	return v
}

// compareValues is the reference's compareRuntimeValues.
func compareValues(a, b Value, caseSensitive bool) (int, error) {
	switch {
	case a.kind == Null && b.kind == Null, a.kind == Undefined && b.kind == Undefined:
		return 0, nil
	case a.kind == Null || b.kind == Null || a.kind == Undefined || b.kind == Undefined:
		return 0, fmt.Errorf("jinja: cannot compare %s with %s", a.kind, b.kind)
	}
	if x, ok := pyNumber(a); ok {
		if y, ok := pyNumber(b); ok {
			return cmpFloat(x, y), nil
		}
	}
	if a.kind != b.kind {
		return 0, fmt.Errorf("jinja: cannot compare different types: %s and %s", a.kind, b.kind)
	}
	if a.kind != String {
		return 0, fmt.Errorf("jinja: cannot compare type: %s", a.kind)
	}
	x, y := a.s, b.s
	if !caseSensitive {
		x, y = jsLower(x), jsLower(y)
	}
	switch {
	case x < y: // Python orders strings by code point, as Go's < on UTF-8
		return -1, nil
	case x > y:
		return 1, nil
	}
	return 0, nil
}

func sortValues(items []Value, reverse, caseSensitive bool, path *string) (Value, error) {
	out := append([]Value(nil), items...)
	var cmpErr error
	key := func(v Value) Value {
		if path == nil {
			return v
		}
		return attrPath(v, *path)
	}
	sort.SliceStable(out, func(i, j int) bool {
		c, err := compareValues(key(out[i]), key(out[j]), caseSensitive)
		if err != nil && cmpErr == nil {
			cmpErr = err
		}
		if reverse {
			c = -c
		}
		return c < 0
	})
	if cmpErr != nil {
		return Value{}, cmpErr
	}
	return ListValue(out), nil
}

// mapFilter is map("filter"): a filter written without arguments applied
// to each item.
func mapFilter(items, args []Value) (Value, error) {
	if len(args) != 1 || args[0].kind != String {
		return Value{}, errors.New("jinja: map needs a filter name or attribute=")
	}
	out := make([]Value, len(items))
	for i, it := range items {
		v, err := plainFilter(it, args[0].s)
		if err != nil {
			return Value{}, err
		}
		out[i] = v
	}
	return ListValue(out), nil
}
