package jinja

import (
	"errors"
	"fmt"
	"strings"
)

func (in *interp) step() error {
	in.steps++
	if in.steps > maxSteps {
		return errors.New("jinja: template exceeded its step budget")
	}
	return nil
}

func (in *interp) evalFor(n *forNode, e *env) (Value, error) {
	scope := newEnv(e)
	var test node
	iterNode := n.iterable
	if sel, ok := n.iterable.(*selectNode); ok {
		iterNode, test = sel.lhs, sel.test
	}
	it, err := in.eval(iterNode, scope)
	if err != nil {
		return Value{}, err
	}
	var src []Value
	switch {
	case it.isArray():
		src = it.arr.items
	case it.isObject():
		for _, k := range it.obj.keys {
			src = append(src, StringValue(k))
		}
	default:
		return Value{}, fmt.Errorf("jinja: expected iterable or object type in for loop: got %s", it.kind)
	}
	bind := func(s *env, cur Value) error {
		switch lv := n.loopvar.(type) {
		case identNode:
			s.vars[lv.name] = cur
		case tupleLit:
			if !cur.isArray() {
				return fmt.Errorf("jinja: cannot unpack non-iterable type: %s", cur.kind)
			}
			if len(lv.items) != len(cur.arr.items) {
				return fmt.Errorf("jinja: wrong number of items to unpack")
			}
			for j, t := range lv.items {
				id, ok := t.(identNode)
				if !ok {
					return errors.New("jinja: cannot unpack to a non-identifier")
				}
				s.vars[id.name] = cur.arr.items[j]
			}
		}
		return nil
	}
	var items []Value
	for _, cur := range src {
		if test != nil {
			ls := newEnv(scope)
			if err := bind(ls, cur); err != nil {
				return Value{}, err
			}
			ok, err := in.eval(test, ls)
			if err != nil {
				return Value{}, err
			}
			if !ok.truthy() {
				continue
			}
		} else if _, ok := n.loopvar.(tupleLit); ok && !cur.isArray() {
			return Value{}, fmt.Errorf("jinja: cannot unpack non-iterable type: %s", cur.kind)
		}
		items = append(items, cur)
	}
	var out strings.Builder
	none := true
	for i, cur := range items {
		if err := in.step(); err != nil {
			return Value{}, err
		}
		loop := NewMap()
		l := len(items)
		loop.Set("index", IntValue(int64(i+1)))
		loop.Set("index0", IntValue(int64(i)))
		loop.Set("revindex", IntValue(int64(l-i)))
		loop.Set("revindex0", IntValue(int64(l-i-1)))
		loop.Set("first", BoolValue(i == 0))
		loop.Set("last", BoolValue(i == l-1))
		loop.Set("length", IntValue(int64(l)))
		prev, next := UndefinedValue, UndefinedValue
		if i > 0 {
			prev = items[i-1]
		}
		if i < l-1 {
			next = items[i+1]
		}
		loop.Set("previtem", prev)
		loop.Set("nextitem", next)
		// As jinja2: each iteration has its own scope, so a name set in one
		// iteration is undefined in the next.
		scope := newEnv(e)
		scope.vars["loop"] = ObjectValue(loop)
		if err := bind(scope, cur); err != nil {
			return Value{}, err
		}
		v, err := in.block(n.body, scope)
		if errors.Is(err, errContinue) {
			continue
		}
		if errors.Is(err, errBreak) {
			break
		}
		if err != nil {
			return Value{}, err
		}
		out.WriteString(v.s)
		none = false
	}
	if none {
		v, err := in.block(n.fallback, newEnv(e))
		if err != nil {
			return Value{}, err
		}
		out.WriteString(v.s)
	}
	return StringValue(out.String()), nil
}

func (in *interp) evalSet(n *setNode, e *env) (Value, error) {
	var rhs Value
	var err error
	if n.value != nil {
		rhs, err = in.eval(n.value, e)
	} else {
		rhs, err = in.block(n.body, e)
	}
	if err != nil {
		return Value{}, err
	}
	switch t := n.target.(type) {
	case identNode:
		e.vars[t.name] = rhs
	case tupleLit:
		if !rhs.isArray() {
			return Value{}, fmt.Errorf("jinja: cannot unpack non-iterable type in set: %s", rhs.kind)
		}
		if len(rhs.arr.items) != len(t.items) {
			return Value{}, errors.New("jinja: wrong number of items to unpack in set")
		}
		for i, it := range t.items {
			id, ok := it.(identNode)
			if !ok {
				return Value{}, errors.New("jinja: cannot unpack to non-identifier in set")
			}
			e.vars[id.name] = rhs.arr.items[i]
		}
	case *memberNode:
		obj, err := in.eval(t.obj, e)
		if err != nil {
			return Value{}, err
		}
		if obj.kind != Namespace {
			return Value{}, errors.New("jinja: cannot assign attribute on non-namespace object")
		}
		id, ok := t.prop.(identNode)
		if !ok {
			return Value{}, errors.New("jinja: cannot assign to member with non-identifier property")
		}
		obj.obj.Set(id.name, rhs)
	default:
		return Value{}, errors.New("jinja: invalid left-hand side in assignment")
	}
	return UndefinedValue, nil
}

type param struct {
	name string
	def  node // nil: no default
}

func params(nodes []node) []param {
	out := make([]param, len(nodes))
	for i, n := range nodes {
		switch n := n.(type) {
		case identNode:
			out[i] = param{name: n.name}
		case kwargNode:
			out[i] = param{name: n.key, def: n.val}
		}
	}
	return out
}

// bindArgs binds macro (or caller) arguments into scope: every parameter
// first, then the defaults, evaluated in the new scope.
func (in *interp) bindArgs(name string, ps []param, special map[string]bool, args []Value, scope *env) error {
	pos := args
	kw := NewMap()
	if n := len(pos); n > 0 && pos[n-1].kind == KwArgs {
		kw = pos[n-1].obj.clone()
		pos = pos[:n-1]
	}
	var pending []param
	for i, p := range ps {
		var v Value
		have := false
		if i < len(pos) {
			v, have = pos[i], true
		}
		if !have {
			if kv, ok := kw.Get(p.name); ok {
				v, have = kv, true
				kw.delete(p.name)
			}
		}
		if !have && p.def != nil {
			pending = append(pending, p)
		}
		scope.vars[p.name] = v
	}
	if special["kwargs"] {
		scope.vars["kwargs"] = ObjectValue(kw)
	} else if kw.Len() > 0 {
		return fmt.Errorf("jinja: macro %s takes no keyword argument '%s'", name, kw.keys[0])
	}
	if special["varargs"] {
		var rest []Value
		if len(pos) > len(ps) {
			rest = pos[len(ps):]
		}
		scope.vars["varargs"] = tupleValue(append([]Value(nil), rest...))
	} else if len(pos) > len(ps) {
		return fmt.Errorf("jinja: macro %s takes not more than %d argument(s)", name, len(ps))
	}
	for _, p := range pending {
		v, err := in.eval(p.def, scope)
		if err != nil {
			return err
		}
		scope.vars[p.name] = v
	}
	return nil
}

func (in *interp) defineMacro(n *macroNode, e *env) {
	ps := params(n.params)
	special := specialArgs(n.params, n.body)
	e.vars[n.name] = Value{kind: Func, fn: &function{call: func(args []Value, caller *env) (Value, error) {
		if err := in.step(); err != nil {
			return Value{}, err
		}
		in.depth++
		defer func() { in.depth-- }()
		if in.depth > maxDepth {
			return Value{}, errors.New("jinja: macro recursion too deep")
		}
		scope := newEnv(caller)
		if err := in.bindArgs("'"+n.name+"'", ps, special, args, scope); err != nil {
			return Value{}, err
		}
		return in.block(n.body, scope)
	}}}
}

func (in *interp) evalCallBlock(n *callBlockNode, e *env) (Value, error) {
	ps := params(n.callerArgs)
	special := specialArgs(n.callerArgs, n.body)
	caller := Value{kind: Func, fn: &function{call: func(args []Value, _ *env) (Value, error) {
		scope := newEnv(e)
		if err := in.bindArgs("None", ps, special, args, scope); err != nil {
			return Value{}, err
		}
		return in.block(n.body, scope)
	}}}
	args, kw, err := in.evalArgs(n.call.args, e)
	if err != nil {
		return Value{}, err
	}
	args = append(args, Value{kind: KwArgs, obj: kw})
	fn, err := in.eval(n.call.callee, e)
	if err != nil {
		return Value{}, err
	}
	if fn.kind != Func {
		return Value{}, fmt.Errorf("jinja: cannot call something that is not a function: got %s", fn.kind)
	}
	scope := newEnv(e)
	scope.vars["caller"] = caller
	return fn.fn.call(args, scope)
}

// specialArgs reports which of kwargs and varargs a macro body reads
// without declaring them, walking the body in the reference's order.
func specialArgs(ps []node, body []node) map[string]bool {
	declared, accessed := map[string]bool{}, map[string]bool{}
	isSpecial := func(s string) bool { return s == "kwargs" || s == "varargs" }
	declare := func(s string) {
		if isSpecial(s) {
			declared[s] = true
		}
	}
	var declareTarget func(n node)
	declareTarget = func(n node) {
		switch t := n.(type) {
		case identNode:
			declare(t.name)
		case tupleLit:
			for _, it := range t.items {
				declareTarget(it)
			}
		}
	}
	var visit func(n node)
	visitAll := func(ns []node) {
		for _, x := range ns {
			visit(x)
		}
	}
	visitFilter := func(f node) {
		if c, ok := f.(*callNode); ok {
			visitAll(c.args)
		}
	}
	visitDefaults := func(args []node) {
		for _, p := range params(args) {
			if p.def != nil {
				visit(p.def)
			}
		}
	}
	visit = func(n node) {
		switch t := n.(type) {
		case *forNode:
			declareTarget(t.loopvar)
			if sel, ok := t.iterable.(*selectNode); ok {
				visit(sel.lhs)
				visitAll(t.body)
				visitAll(t.fallback)
				visit(sel.test)
				return
			}
			visit(t.iterable)
			visitAll(t.body)
			visitAll(t.fallback)
		case *setNode:
			declareTarget(t.target)
			visit(t.value)
			visitAll(t.body)
		case *macroNode:
			for _, p := range params(t.params) {
				declare(p.name)
			}
			visitDefaults(t.params)
			visitAll(t.body)
		case *callBlockNode:
			visit(t.call)
			for _, p := range params(t.callerArgs) {
				declare(p.name)
			}
			visitDefaults(t.callerArgs)
			visitAll(t.body)
		case *filterBlockNode:
			visitAll(t.body)
			visitFilter(t.filter)
		case identNode:
			if isSpecial(t.name) && !declared[t.name] {
				accessed[t.name] = true
			}
		case *memberNode:
			visit(t.obj)
			if t.computed {
				visit(t.prop)
			}
		case *filterNode:
			visit(t.operand)
			visitFilter(t.filter)
		case *testNode:
			visit(t.operand)
		case *selectNode:
			visit(t.test)
			visit(t.lhs)
		case kwargNode:
			visit(t.val)
		case *ifNode:
			visit(t.test)
			visitAll(t.body)
			visitAll(t.alt)
		case *callNode:
			visit(t.callee)
			visitAll(t.args)
		case *binaryNode:
			visit(t.left)
			visit(t.right)
		case *unaryNode:
			visit(t.arg)
		case *ternaryNode:
			visit(t.cond)
			visit(t.a)
			visit(t.b)
		case arrayLit:
			visitAll(t.items)
		case tupleLit:
			visitAll(t.items)
		case objectLit:
			for i := range t.keys {
				visit(t.keys[i])
				visit(t.vals[i])
			}
		case *sliceNode:
			visit(t.start)
			visit(t.stop)
			visit(t.step)
		case spreadNode:
			visit(t.arg)
		case kwSpreadNode:
			visit(t.arg)
		}
	}
	for _, p := range params(ps) {
		declare(p.name)
	}
	visitAll(body)
	return accessed
}
