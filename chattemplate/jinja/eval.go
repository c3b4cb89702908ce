package jinja

import (
	"errors"
	"fmt"
	"strings"
)

// env is one variable scope (the reference's Environment).
type env struct {
	vars   map[string]Value
	parent *env
}

func newEnv(parent *env) *env { return &env{vars: map[string]Value{}, parent: parent} }

func (e *env) lookup(name string) Value {
	for s := e; s != nil; s = s.parent {
		if v, ok := s.vars[name]; ok {
			return v
		}
	}
	return UndefinedValue
}

var (
	errBreak    = errors.New("jinja: break outside a loop")
	errContinue = errors.New("jinja: continue outside a loop")
)

// maxDepth bounds recursion (macros calling macros) so that a hostile
// template fails instead of exhausting the stack.
const maxDepth = 200

type interp struct {
	depth int
	steps int // loop iterations and macro calls, bounded by maxSteps
}

const maxSteps = 10_000_000

func (in *interp) block(nodes []node, e *env) (Value, error) {
	var b strings.Builder
	for _, n := range nodes {
		v, err := in.eval(n, e)
		if err != nil {
			return Value{}, err
		}
		if v.kind == Undefined { // statements, and undefined variables, print nothing
			continue
		}
		s, err := v.toString()
		if err != nil {
			return Value{}, err
		}
		b.WriteString(s)
	}
	return StringValue(b.String()), nil
}

func (in *interp) eval(n node, e *env) (Value, error) {
	switch n := n.(type) {
	case nil:
		return UndefinedValue, nil
	case textNode:
		return StringValue(n.s), nil
	case intLit:
		return intValueOf(n.lit, n.n), nil
	case floatLit:
		return FloatValue(n.n), nil
	case commentNode:
		return UndefinedValue, nil
	case breakNode:
		return Value{}, errBreak
	case continueNode:
		return Value{}, errContinue
	case arrayLit:
		items, err := in.evalAll(n.items, e)
		return ListValue(items), err
	case tupleLit:
		items, err := in.evalAll(n.items, e)
		return tupleValue(items), err
	case objectLit:
		m := NewMap()
		for i := range n.keys {
			k, err := in.eval(n.keys[i], e)
			if err != nil {
				return Value{}, err
			}
			if k.kind != String {
				return Value{}, fmt.Errorf("jinja: object keys must be strings: got %s", k.kind)
			}
			v, err := in.eval(n.vals[i], e)
			if err != nil {
				return Value{}, err
			}
			m.Set(k.s, v)
		}
		return ObjectValue(m), nil
	case identNode:
		return e.lookup(n.name), nil
	case *callNode:
		return in.evalCall(n, e)
	case *memberNode:
		return in.evalMember(n, e)
	case *unaryNode:
		return in.evalUnary(n, e)
	case *binaryNode:
		return in.evalBinary(n, e)
	case *filterNode:
		operand, err := in.eval(n.operand, e)
		if err != nil {
			return Value{}, err
		}
		return in.applyFilter(operand, n.filter, e)
	case *filterBlockNode:
		body, err := in.block(n.body, e)
		if err != nil {
			return Value{}, err
		}
		return in.applyFilter(body, n.filter, e)
	case *testNode:
		operand, err := in.eval(n.operand, e)
		if err != nil {
			return Value{}, err
		}
		test, ok := tests[n.name]
		if !ok {
			return Value{}, fmt.Errorf("jinja: unknown test: %s", n.name)
		}
		r, err := test(operand, nil)
		if err != nil {
			return Value{}, err
		}
		return BoolValue(r != n.negate), nil
	case *selectNode:
		pred, err := in.eval(n.test, e)
		if err != nil || !pred.truthy() {
			return UndefinedValue, err
		}
		return in.eval(n.lhs, e)
	case *ternaryNode:
		c, err := in.eval(n.cond, e)
		if err != nil {
			return Value{}, err
		}
		if c.truthy() {
			return in.eval(n.a, e)
		}
		return in.eval(n.b, e)
	case *ifNode:
		t, err := in.eval(n.test, e)
		if err != nil {
			return Value{}, err
		}
		if t.truthy() {
			return in.block(n.body, e)
		}
		return in.block(n.alt, e)
	case *forNode:
		return in.evalFor(n, e)
	case *setNode:
		return in.evalSet(n, e)
	case *macroNode:
		in.defineMacro(n, e)
		return UndefinedValue, nil
	case *callBlockNode:
		return in.evalCallBlock(n, e)
	}
	return Value{}, fmt.Errorf("jinja: unknown node %T", n)
}

func (in *interp) evalAll(nodes []node, e *env) ([]Value, error) {
	out := make([]Value, len(nodes))
	for i, n := range nodes {
		v, err := in.eval(n, e)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// evalArgs evaluates call arguments into positional values and keyword
// arguments, spreading *list and **mapping.
func (in *interp) evalArgs(args []node, e *env) ([]Value, *Map, error) {
	var pos []Value
	kw := NewMap()
	for _, a := range args {
		switch a := a.(type) {
		case spreadNode:
			v, err := in.eval(a.arg, e)
			if err != nil {
				return nil, nil, err
			}
			if !v.isArray() {
				return nil, nil, fmt.Errorf("jinja: cannot unpack non-iterable type: %s", v.kind)
			}
			pos = append(pos, v.arr.items...)
		case kwargNode, kwSpreadNode:
		default:
			v, err := in.eval(a, e)
			if err != nil {
				return nil, nil, err
			}
			pos = append(pos, v)
		}
	}
	add := func(k string, v Value) error {
		if _, dup := kw.Get(k); dup {
			return fmt.Errorf("jinja: got multiple values for keyword argument '%s'", k)
		}
		kw.Set(k, v)
		return nil
	}
	for _, a := range args {
		switch a := a.(type) {
		case kwargNode:
			v, err := in.eval(a.val, e)
			if err != nil {
				return nil, nil, err
			}
			if err := add(a.key, v); err != nil {
				return nil, nil, err
			}
		case kwSpreadNode:
			v, err := in.eval(a.arg, e)
			if err != nil {
				return nil, nil, err
			}
			if !v.isObject() {
				return nil, nil, fmt.Errorf("jinja: argument after ** must be a mapping, not %s", v.kind)
			}
			for _, k := range v.obj.keys {
				if err := add(k, v.obj.vals[k]); err != nil {
					return nil, nil, err
				}
			}
		}
	}
	return pos, kw, nil
}

func (in *interp) evalCall(n *callNode, e *env) (Value, error) {
	args, kw, err := in.evalArgs(n.args, e)
	if err != nil {
		return Value{}, err
	}
	if kw.Len() > 0 {
		args = append(args, Value{kind: KwArgs, obj: kw})
	}
	fn, err := in.eval(n.callee, e)
	if err != nil {
		return Value{}, err
	}
	if fn.kind != Func {
		return Value{}, fmt.Errorf("jinja: cannot call something that is not a function: got %s", fn.kind)
	}
	return fn.fn.call(args, e)
}

func (in *interp) evalMember(n *memberNode, e *env) (Value, error) {
	obj, err := in.eval(n.obj, e)
	if err != nil {
		return Value{}, err
	}
	var prop Value
	switch {
	case n.computed:
		if s, ok := n.prop.(*sliceNode); ok {
			return in.evalSlice(obj, s, e)
		}
		if prop, err = in.eval(n.prop, e); err != nil {
			return Value{}, err
		}
	default:
		switch p := n.prop.(type) {
		case intLit:
			prop = Value{kind: Int, n: p.n}
		case identNode:
			prop = StringValue(p.name)
		}
	}
	switch {
	case obj.attrContainer():
		if prop.kind != String {
			return Value{}, fmt.Errorf("jinja: cannot access property with non-string: got %s", prop.kind)
		}
		if v, ok := obj.obj.Get(prop.s); ok {
			return v, nil
		}
		if obj.isObject() {
			return objectBuiltin(obj, prop.s), nil
		}
		return UndefinedValue, nil
	case obj.isArray() || obj.kind == String:
		switch prop.kind {
		case Int:
			i := int(prop.n)
			if obj.kind == String {
				if s, ok := runeAt(obj.s, i); ok {
					return StringValue(s), nil
				}
				return UndefinedValue, nil
			}
			if i < 0 {
				i += len(obj.arr.items)
			}
			if i < 0 || i >= len(obj.arr.items) {
				return UndefinedValue, nil
			}
			return obj.arr.items[i], nil
		case String:
			if obj.kind == String {
				return stringBuiltin(obj.s, prop.s), nil
			}
			if prop.s == "length" {
				return IntValue(int64(len(obj.arr.items))), nil
			}
			return UndefinedValue, nil
		}
		return Value{}, fmt.Errorf("jinja: cannot access property with non-string/non-number: got %s", prop.kind)
	}
	if prop.kind != String {
		return Value{}, fmt.Errorf("jinja: cannot access property with non-string: got %s", prop.kind)
	}
	return UndefinedValue, nil
}

func (in *interp) evalSlice(obj Value, s *sliceNode, e *env) (Value, error) {
	if !obj.isArray() && obj.kind != String {
		return Value{}, errors.New("jinja: slice object must be an array or string")
	}
	var bounds [3]*int
	for i, part := range []node{s.start, s.stop, s.step} {
		v, err := in.eval(part, e)
		if err != nil {
			return Value{}, err
		}
		switch v.kind {
		case Undefined:
		case Int:
			n := int(v.n)
			bounds[i] = &n
		default:
			return Value{}, errors.New("jinja: slice indices must be integers or undefined")
		}
	}
	if obj.isArray() {
		idx := sliceIndices(len(obj.arr.items), bounds)
		out := make([]Value, len(idx))
		for i, j := range idx {
			out[i] = obj.arr.items[j]
		}
		return ListValue(out), nil
	}
	runes := []rune(obj.s) // the reference slices code points (Array.from)
	var b strings.Builder
	for _, j := range sliceIndices(len(runes), bounds) {
		b.WriteRune(runes[j])
	}
	return StringValue(b.String()), nil
}

// sliceIndices is the reference's slice() over a length.
func sliceIndices(length int, b [3]*int) []int {
	step := 1
	if b[2] != nil {
		step = *b[2]
	}
	var start, stop int
	if step >= 0 {
		start, stop = 0, length
		if b[0] != nil {
			start = clampIdx(*b[0], length, 0, length)
		}
		if b[1] != nil {
			stop = clampIdx(*b[1], length, 0, length)
		}
	} else {
		start, stop = length-1, -1
		if b[0] != nil {
			start = clampIdx(*b[0], length, -1, length-1)
		}
		if b[1] != nil {
			if *b[1] < -1 {
				stop = max(length+*b[1], -1)
			} else {
				stop = min(*b[1], length-1)
			}
		}
	}
	var out []int
	if step == 0 {
		return out
	}
	dir := 1
	if step < 0 {
		dir = -1
	}
	for i := start; dir*i < dir*stop; i += step {
		out = append(out, i)
	}
	return out
}

func clampIdx(i, length, lo, hi int) int {
	if i < 0 {
		return max(length+i, lo)
	}
	return min(i, hi)
}

func (in *interp) evalUnary(n *unaryNode, e *env) (Value, error) {
	arg, err := in.eval(n.arg, e)
	if err != nil {
		return Value{}, err
	}
	if n.op == "not" {
		return BoolValue(!arg.truthy()), nil
	}
	sign := 1.0
	if n.op == "-" {
		sign = -1
	}
	switch arg.kind {
	case Int, Float, Bool:
		x := arg.n
		if arg.kind == Bool {
			x = boolNum(arg.b)
		}
		if arg.kind == Float {
			return FloatValue(sign * x), nil
		}
		return Value{kind: Int, n: sign * x}, nil
	}
	return Value{}, fmt.Errorf("jinja: unknown operator %q for %s", n.op, arg.kind)
}

func (in *interp) evalBinary(n *binaryNode, e *env) (Value, error) {
	left, err := in.eval(n.left, e)
	if err != nil {
		return Value{}, err
	}
	switch n.op {
	case "and":
		if !left.truthy() {
			return left, nil
		}
		return in.eval(n.right, e)
	case "or":
		if left.truthy() {
			return left, nil
		}
		return in.eval(n.right, e)
	}
	right, err := in.eval(n.right, e)
	if err != nil {
		return Value{}, err
	}
	return binaryOp(n.op, left, right)
}

// concat is "~": str() of both sides.
func concat(a, b Value) (Value, error) {
	sa, err := a.pyStr()
	if err != nil {
		return Value{}, err
	}
	sb, err := b.pyStr()
	if err != nil {
		return Value{}, err
	}
	return StringValue(sa + sb), nil
}
