package jinja

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// binaryOp applies a binary operator with Python's semantics: int and
// float arithmetic (/ is always a float, // and % floor), + only between
// two strings, two lists or two numbers, == by value.
func binaryOp(op string, left, right Value) (Value, error) {
	switch op {
	case "==":
		return BoolValue(pyEq(left, right)), nil
	case "!=":
		return BoolValue(!pyEq(left, right)), nil
	case "~":
		return concat(left, right)
	case "in", "not in":
		found, err := contains(right, left)
		return BoolValue(found == (op == "in")), err
	}
	if left.kind == Undefined || right.kind == Undefined {
		return Value{}, fmt.Errorf("jinja: cannot perform operation %s on undefined values", op)
	}
	if _, ok := pyNumber(left); ok {
		if _, ok := pyNumber(right); ok {
			return numberOp(op, left, right)
		}
	}
	switch {
	case op == "+" && left.kind == String && right.kind == String:
		return StringValue(left.s + right.s), nil
	case op == "+" && left.isArray() && right.isArray() && left.kind == right.kind:
		items := append(append([]Value(nil), left.arr.items...), right.arr.items...)
		return Value{kind: left.kind, arr: &list{items}}, nil
	case op == "*" && left.kind == String && right.kind == Int:
		return StringValue(strings.Repeat(left.s, max(0, int(right.n)))), nil
	case left.kind == String && right.kind == String:
		if r, ok := compare(op, strings.Compare(left.s, right.s)); ok {
			return BoolValue(r), nil
		}
	}
	return Value{}, fmt.Errorf("jinja: unsupported operand types for %s: %s and %s", op, left.kind, right.kind)
}

// contains is Python's "needle in haystack".
func contains(haystack, needle Value) (bool, error) {
	switch {
	case haystack.kind == Undefined: // jinja2's Undefined iterates as empty
		return false, nil
	case haystack.isArray():
		for _, x := range haystack.arr.items {
			if pyEq(x, needle) {
				return true, nil
			}
		}
		return false, nil
	case haystack.attrContainer():
		_, has := haystack.obj.Get(needle.s)
		return needle.kind == String && has, nil
	case haystack.kind == String && needle.kind == String:
		return strings.Contains(haystack.s, needle.s), nil
	}
	return false, fmt.Errorf("jinja: 'in' needs a list, mapping or string on the right, got %s and %s", needle.kind, haystack.kind)
}

func compare(op string, c int) (bool, bool) {
	switch op {
	case "<":
		return c < 0, true
	case ">":
		return c > 0, true
	case "<=":
		return c <= 0, true
	case ">=":
		return c >= 0, true
	}
	return false, false
}

// numberOp is arithmetic and comparison on ints, floats and bools: the
// result is an int when both sides are (exact within int64), else a float.
func numberOp(op string, left, right Value) (Value, error) {
	a, _ := pyNumber(left)
	b, _ := pyNumber(right)
	if r, ok := compare(op, cmpFloat(a, b)); ok {
		return BoolValue(r), nil
	}
	ints := left.kind != Float && right.kind != Float
	num := func(r float64) Value {
		if ints {
			return numberValue(r)
		}
		return FloatValue(r)
	}
	if (op == "/" || op == "//" || op == "%") && b == 0 {
		return Value{}, errors.New("jinja: division by zero")
	}
	switch op {
	case "+", "-", "*":
		if ints {
			if v, ok := exactIntOp(op, left, right); ok {
				return v, nil
			}
		}
		return num(map[string]func() float64{"+": func() float64 { return a + b }, "-": func() float64 { return a - b },
			"*": func() float64 { return a * b }}[op]()), nil
	case "/":
		return FloatValue(a / b), nil
	case "//":
		return num(math.Floor(a / b)), nil
	case "%":
		r := math.Mod(a, b)
		if r != 0 && (r < 0) != (b < 0) {
			r += b
		}
		return num(r), nil
	case "**":
		if a == 0 && b < 0 {
			return Value{}, errors.New("jinja: 0.0 cannot be raised to a negative power")
		}
		if ints && b < 0 {
			return FloatValue(math.Pow(a, b)), nil
		}
		return num(math.Pow(a, b)), nil
	}
	return Value{}, fmt.Errorf("jinja: unknown operator %q", op)
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// exactIntOp is +, - and * on two ints that hold their exact value, when
// the result fits an int64 (past that Python's ints stay exact and the
// float here does not).
func exactIntOp(op string, left, right Value) (Value, bool) {
	x, okx := exactInt(left)
	y, oky := exactInt(right)
	if !okx || !oky {
		return Value{}, false
	}
	var r int64
	switch op {
	case "+":
		r = x + y
		if (r > x) != (y > 0) {
			return Value{}, false
		}
	case "-":
		r = x - y
		if (r < x) != (y > 0) {
			return Value{}, false
		}
	case "*":
		if x != 0 && (x*y/x != y || (x == -1 && y == math.MinInt64) || (y == -1 && x == math.MinInt64)) {
			return Value{}, false
		}
		r = x * y
	}
	return IntValue(r), true
}

func exactInt(v Value) (int64, bool) {
	switch v.kind {
	case Bool:
		return int64(boolNum(v.b)), true
	case Int:
		return v.i, float64(v.i) == v.n
	}
	return 0, false
}
