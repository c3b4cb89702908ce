package jinja

import (
	"fmt"
	"strconv"
	"strings"
)

type parser struct {
	toks []token
	cur  int
}

func parse(toks []token) (body []node, err error) {
	p := &parser{toks: toks}
	defer func() {
		if r := recover(); r != nil {
			pe, ok := r.(parseError)
			if !ok {
				panic(r)
			}
			err = pe
		}
	}()
	for p.cur < len(p.toks) {
		body = append(body, p.parseAny())
	}
	return body, nil
}

// parseError is raised by panic inside the recursive-descent parser and
// turned into an error by parse.
type parseError struct{ msg string }

func (e parseError) Error() string { return "jinja: " + e.msg }

func (p *parser) fail(format string, a ...any) { panic(parseError{fmt.Sprintf(format, a...)}) }

func (p *parser) tok(i int) (token, bool) {
	if i < len(p.toks) {
		return p.toks[i], true
	}
	return token{}, false
}

func (p *parser) expect(t tokType, what string) token {
	tk, ok := p.tok(p.cur)
	p.cur++
	if !ok || tk.typ != t {
		p.fail("parser error: %s", what)
	}
	return tk
}

func (p *parser) is(types ...tokType) bool {
	if p.cur+len(types) > len(p.toks) {
		return false
	}
	for i, t := range types {
		if p.toks[p.cur+i].typ != t {
			return false
		}
	}
	return true
}

func (p *parser) isIdent(names ...string) bool {
	if p.cur+len(names) > len(p.toks) {
		return false
	}
	for i, n := range names {
		if tk := p.toks[p.cur+i]; tk.typ != tIdent || tk.val != n {
			return false
		}
	}
	return true
}

func (p *parser) isStatement(names ...string) bool {
	a, ok1 := p.tok(p.cur)
	b, ok2 := p.tok(p.cur + 1)
	if !ok1 || !ok2 || a.typ != tOpenStatement || b.typ != tIdent {
		return false
	}
	for _, n := range names {
		if b.val == n {
			return true
		}
	}
	return false
}

func (p *parser) expectIdent(name string) {
	if !p.isIdent(name) {
		p.fail("expected %s", name)
	}
	p.cur++
}

// untilStatement parses nodes until one of the named statements opens.
func (p *parser) untilStatement(names ...string) []node {
	var out []node
	for !p.isStatement(names...) {
		if p.cur >= len(p.toks) {
			p.fail("unexpected end of template, expected %s", strings.Join(names, " or "))
		}
		out = append(out, p.parseAny())
	}
	return out
}

func (p *parser) endStatement(name string) {
	p.expect(tOpenStatement, "expected {%")
	p.expectIdent(name)
	p.expect(tCloseStatement, "expected %}")
}

func (p *parser) parseAny() node {
	tk := p.toks[p.cur]
	switch tk.typ {
	case tComment:
		p.cur++
		return commentNode{}
	case tText:
		p.cur++
		return textNode{tk.val}
	case tOpenStatement:
		return p.parseStatement()
	case tOpenExpression:
		p.cur++
		e := p.parseExpression()
		p.expect(tCloseExpression, "expected closing expression token")
		return e
	}
	p.fail("unexpected token %q", tk.val)
	return nil
}

func (p *parser) parseStatement() node {
	p.expect(tOpenStatement, "expected opening statement token")
	tk, ok := p.tok(p.cur)
	if !ok || tk.typ != tIdent {
		p.fail("unknown statement")
	}
	p.cur++
	switch tk.val {
	case "set":
		return p.parseSet()
	case "if":
		n := p.parseIf()
		p.endStatement("endif")
		return n
	case "macro":
		name, ok := p.parsePrimary().(identNode)
		if !ok {
			p.fail("expected identifier following macro statement")
		}
		params := p.parseArgs(true)
		p.expect(tCloseStatement, "expected closing statement token")
		body := p.untilStatement("endmacro")
		p.endStatement("endmacro")
		return &macroNode{name: name.name, params: params, body: body}
	case "for":
		n := p.parseFor()
		p.endStatement("endfor")
		return n
	case "call":
		var callerArgs []node
		if p.is(tOpenParen) {
			callerArgs = p.parseArgs(true)
		}
		callee, ok := p.parsePrimary().(identNode)
		if !ok {
			p.fail("expected identifier following call statement")
		}
		args := p.parseArgs(false)
		p.expect(tCloseStatement, "expected closing statement token")
		body := p.untilStatement("endcall")
		p.endStatement("endcall")
		return &callBlockNode{call: &callNode{callee: callee, args: args}, callerArgs: callerArgs, body: body}
	case "break":
		p.expect(tCloseStatement, "expected closing statement token")
		return breakNode{}
	case "continue":
		p.expect(tCloseStatement, "expected closing statement token")
		return continueNode{}
	case "filter":
		f := p.parsePrimary()
		if _, ok := f.(identNode); ok && p.is(tOpenParen) {
			f = p.parseCall(f)
		}
		p.expect(tCloseStatement, "expected closing statement token")
		body := p.untilStatement("endfilter")
		p.endStatement("endfilter")
		return &filterBlockNode{filter: f, body: body}
	}
	p.fail("unknown statement type: %s", tk.val)
	return nil
}

func (p *parser) parseSet() node {
	target := p.parseSequence(false)
	n := &setNode{target: target}
	if p.is(tEquals) {
		p.cur++
		n.value = p.parseSequence(false)
	} else {
		p.expect(tCloseStatement, "expected %} token")
		n.body = p.untilStatement("endset")
		p.expect(tOpenStatement, "expected {% token")
		p.expectIdent("endset")
	}
	p.expect(tCloseStatement, "expected closing statement token")
	return n
}

func (p *parser) parseIf() node {
	n := &ifNode{test: p.parseExpression()}
	p.expect(tCloseStatement, "expected closing statement token")
	n.body = p.untilStatement("elif", "else", "endif")
	if p.isStatement("elif") {
		p.cur += 2
		n.alt = []node{p.parseIf()}
	} else if p.isStatement("else") {
		p.cur += 2
		p.expect(tCloseStatement, "expected closing statement token")
		n.alt = p.untilStatement("endif")
	}
	return n
}

func (p *parser) parseFor() node {
	lv := p.parseSequence(true)
	switch lv.(type) {
	case identNode, tupleLit:
	default:
		p.fail("expected identifier/tuple for the loop variable")
	}
	if !p.isIdent("in") {
		p.fail("expected `in` keyword following loop variable")
	}
	p.cur++
	n := &forNode{loopvar: lv, iterable: p.parseExpression()}
	p.expect(tCloseStatement, "expected closing statement token")
	n.body = p.untilStatement("endfor", "else")
	if p.isStatement("else") {
		p.cur += 2
		p.expect(tCloseStatement, "expected closing statement token")
		n.fallback = p.untilStatement("endfor")
	}
	return n
}

func (p *parser) parseSequence(primary bool) node {
	next := p.parseExpression
	if primary {
		next = p.parsePrimary
	}
	items := []node{next()}
	tuple := p.is(tComma)
	for tuple {
		p.cur++
		items = append(items, next())
		if !p.is(tComma) {
			break
		}
	}
	if tuple {
		return tupleLit{items}
	}
	return items[0]
}

func (p *parser) parseExpression() node {
	a := p.parseOr()
	if p.isIdent("if") {
		p.cur++
		test := p.parseOr()
		if p.isIdent("else") {
			p.cur++
			return &ternaryNode{cond: test, a: a, b: p.parseExpression()}
		}
		return &selectNode{lhs: a, test: test}
	}
	return a
}

func (p *parser) parseOr() node {
	left := p.parseAnd()
	for p.isIdent("or") {
		p.cur++
		left = &binaryNode{op: "or", left: left, right: p.parseAnd()}
	}
	return left
}

func (p *parser) parseAnd() node {
	left := p.parseNot()
	for p.isIdent("and") {
		p.cur++
		left = &binaryNode{op: "and", left: left, right: p.parseNot()}
	}
	return left
}

func (p *parser) parseNot() node {
	var n node
	for p.isIdent("not") {
		p.cur++
		n = &unaryNode{op: "not", arg: p.parseNot()}
	}
	if n != nil {
		return n
	}
	return p.parseComparison()
}

func (p *parser) parseComparison() node {
	left := p.parseAdditive()
	for {
		var op string
		switch {
		case p.isIdent("not", "in"):
			op = "not in"
			p.cur += 2
		case p.isIdent("in"):
			op = "in"
			p.cur++
		case p.is(tComparison):
			op = p.toks[p.cur].val
			p.cur++
		default:
			return left
		}
		left = &binaryNode{op: op, left: left, right: p.parseAdditive()}
	}
}

// leftAssoc parses a left-associative level of binary operators of type t.
func (p *parser) leftAssoc(t tokType, next func() node) node {
	left := next()
	for p.is(t) {
		op := p.toks[p.cur].val
		p.cur++
		left = &binaryNode{op: op, left: left, right: next()}
	}
	return left
}

func (p *parser) parseAdditive() node { return p.leftAssoc(tAdditive, p.parseMultiplicative) }

func (p *parser) parseMultiplicative() node { return p.leftAssoc(tMultiplicative, p.parsePower) }

func (p *parser) parsePower() node { return p.leftAssoc(tPower, p.parseTest) }

func (p *parser) parseTest() node {
	operand := p.parseFilter()
	for p.isIdent("is") {
		p.cur++
		negate := p.isIdent("not")
		if negate {
			p.cur++
		}
		var name string
		switch t := p.parsePrimary().(type) {
		case identNode:
			name = t.name
		default:
			p.fail("expected identifier for the test")
		}
		operand = &testNode{operand: operand, negate: negate, name: name}
	}
	return operand
}

func (p *parser) parseFilter() node {
	operand := p.parseUnarySign()
	for p.is(tPipe) {
		p.cur++
		f := p.parsePrimary()
		if _, ok := f.(identNode); !ok {
			p.fail("expected identifier for the filter")
		}
		if p.is(tOpenParen) {
			f = p.parseCall(f)
		}
		operand = &filterNode{operand: operand, filter: f}
	}
	return operand
}

func (p *parser) parseUnarySign() node {
	if tk, ok := p.tok(p.cur); ok && (tk.typ == tUnary || tk.typ == tAdditive) && (tk.val == "-" || tk.val == "+") {
		p.cur++
		return &unaryNode{op: tk.val, arg: p.parseUnarySign()}
	}
	m := p.parseMember(p.parsePrimary())
	if p.is(tOpenParen) {
		return p.parseCall(m)
	}
	return m
}

func (p *parser) parseCall(callee node) node {
	var e node = &callNode{callee: callee, args: p.parseArgs(false)}
	e = p.parseMember(e)
	if p.is(tOpenParen) {
		e = p.parseCall(e)
	}
	return e
}

// parseArgs parses "(...)": call arguments, or macro parameters when params.
func (p *parser) parseArgs(params bool) []node {
	p.expect(tOpenParen, "expected opening parenthesis for arguments list")
	var args []node
	names := map[string]bool{}
	sawKeyword, sawSpread := false, false
	for !p.is(tCloseParen) {
		if p.cur >= len(p.toks) {
			p.fail("unexpected end of template in arguments list")
		}
		kwSpread := p.is(tPower)
		spread := p.is(tMultiplicative) && p.toks[p.cur].val == "*"
		if params && (kwSpread || spread) {
			p.fail("argument unpacking is not allowed in parameter declarations")
		}
		if kwSpread {
			p.cur++
			args = append(args, kwSpreadNode{p.parseExpression()})
			if p.is(tComma) {
				p.cur++
			}
			if !p.is(tCloseParen) {
				p.fail("expected closing parenthesis: `**` must be applied to the final argument")
			}
			break
		}
		var arg node
		if spread {
			if sawSpread {
				p.fail("only one `*` argument unpacking is allowed")
			}
			sawSpread = true
			p.cur++
			arg = spreadNode{p.parseExpression()}
		} else {
			arg = p.parseExpression()
			if p.is(tEquals) {
				p.cur++
				id, ok := arg.(identNode)
				if !ok {
					p.fail("expected identifier for keyword argument")
				}
				arg = kwargNode{key: id.name, val: p.parseExpression()}
			}
			if params {
				var name string
				switch a := arg.(type) {
				case identNode:
					name = a.name
				case kwargNode:
					name = a.key
				default:
					p.fail("expected identifier for parameter declaration")
				}
				if names[name] {
					p.fail("duplicate parameter name: %s", name)
				}
				names[name] = true
			}
			if _, ok := arg.(kwargNode); ok {
				sawKeyword = true
			} else if sawKeyword {
				p.fail("positional arguments must come before keyword arguments")
			} else if sawSpread {
				p.fail("positional arguments must not follow `*` argument unpacking")
			}
		}
		args = append(args, arg)
		if p.is(tComma) {
			p.cur++
		}
	}
	p.expect(tCloseParen, "expected closing parenthesis for arguments list")
	return args
}

func (p *parser) parseSubscript() node {
	var parts []node
	slice := false
	for !p.is(tCloseBracket) {
		if p.cur >= len(p.toks) {
			p.fail("unexpected end of template in subscript")
		}
		if p.is(tColon) {
			parts = append(parts, nil)
			p.cur++
			slice = true
			continue
		}
		parts = append(parts, p.parseExpression())
		if p.is(tColon) {
			p.cur++
			slice = true
		}
	}
	if len(parts) == 0 {
		p.fail("expected at least one argument for member/slice expression")
	}
	if !slice {
		return parts[0]
	}
	if len(parts) > 3 {
		p.fail("expected 0-3 arguments for slice expression")
	}
	s := &sliceNode{}
	for i, part := range parts {
		switch i {
		case 0:
			s.start = part
		case 1:
			s.stop = part
		case 2:
			s.step = part
		}
	}
	return s
}

func (p *parser) parseMember(obj node) node {
	for p.is(tDot) || p.is(tOpenBracket) {
		computed := p.toks[p.cur].typ == tOpenBracket
		p.cur++
		var prop node
		if computed {
			prop = p.parseSubscript()
			p.expect(tCloseBracket, "expected closing square bracket")
		} else {
			prop = p.parsePrimary()
			switch prop.(type) {
			case identNode, intLit:
			default:
				p.fail("expected identifier or integer following dot operator")
			}
		}
		obj = &memberNode{obj: obj, prop: prop, computed: computed}
	}
	return obj
}

func (p *parser) parsePrimary() node {
	tk, ok := p.tok(p.cur)
	if !ok {
		p.fail("unexpected end of template")
	}
	p.cur++
	switch tk.typ {
	case tNumber:
		f, err := strconv.ParseFloat(tk.val, 64)
		if err != nil {
			p.fail("bad number %q", tk.val)
		}
		if strings.ContainsAny(tk.val, ".e") {
			return floatLit{f}
		}
		return intLit{f, tk.val}
	case tString:
		s := tk.val
		for p.is(tString) {
			s += p.toks[p.cur].val
			p.cur++
		}
		return textNode{s}
	case tIdent:
		return identNode{tk.val}
	case tOpenParen:
		e := p.parseSequence(false)
		p.expect(tCloseParen, "expected closing parenthesis")
		return e
	case tOpenBracket:
		var items []node
		for !p.is(tCloseBracket) {
			if p.cur >= len(p.toks) {
				p.fail("unexpected end of template in list")
			}
			items = append(items, p.parseExpression())
			if p.is(tComma) {
				p.cur++
			}
		}
		p.cur++
		return arrayLit{items}
	case tOpenCurly:
		o := objectLit{}
		for !p.is(tCloseCurly) {
			if p.cur >= len(p.toks) {
				p.fail("unexpected end of template in mapping")
			}
			k := p.parseExpression()
			p.expect(tColon, "expected colon between key and value in object literal")
			o.keys = append(o.keys, k)
			o.vals = append(o.vals, p.parseExpression())
			if p.is(tComma) {
				p.cur++
			}
		}
		p.cur++
		return o
	}
	p.fail("unexpected token %q", tk.val)
	return nil
}
