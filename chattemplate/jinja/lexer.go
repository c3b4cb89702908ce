package jinja

import (
	"fmt"
	"strings"
	"unicode/utf16"
)

type tokType uint8

const (
	tText tokType = iota
	tNumber
	tString
	tIdent
	tEquals
	tOpenParen
	tCloseParen
	tOpenStatement
	tCloseStatement
	tOpenExpression
	tCloseExpression
	tOpenBracket
	tCloseBracket
	tOpenCurly
	tCloseCurly
	tComma
	tDot
	tColon
	tPipe
	tAdditive       // + - ~
	tMultiplicative // * / // %
	tPower          // **
	tComparison     // < > <= >= == !=
	tUnary          // - + before an operand
	tComment
)

type token struct {
	val string
	typ tokType
}

// symbols is the reference lexer's ordered mapping table: the first entry
// that matches at the cursor wins, so "**" precedes "*" and "//" precedes "/".
var symbols = []struct {
	seq string
	typ tokType
}{
	{"{%", tOpenStatement}, {"%}", tCloseStatement}, {"{{", tOpenExpression}, {"}}", tCloseExpression},
	{"(", tOpenParen}, {")", tCloseParen}, {"{", tOpenCurly}, {"}", tCloseCurly},
	{"[", tOpenBracket}, {"]", tCloseBracket}, {",", tComma}, {".", tDot}, {":", tColon}, {"|", tPipe},
	{"<=", tComparison}, {">=", tComparison}, {"==", tComparison}, {"!=", tComparison},
	{"<", tComparison}, {">", tComparison},
	{"+", tAdditive}, {"-", tAdditive}, {"~", tAdditive},
	{"**", tPower}, {"*", tMultiplicative}, {"//", tMultiplicative}, {"/", tMultiplicative}, {"%", tMultiplicative},
	{"=", tEquals},
}

var escapes = map[rune]rune{'n': '\n', 't': '\t', 'r': '\r', 'b': '\b', 'f': '\f', 'v': '\v', '\'': '\'', '"': '"', '\\': '\\'}

func isWordRune(r rune) bool {
	return r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
}

func isDigit(r rune) bool { return r >= '0' && r <= '9' }

// preprocess applies what the reference does before lexing: drop one
// trailing newline, lstrip_blocks, trim_blocks, and remove {% generation %}
// markers (with their surrounding whitespace unless the marker has a dash).
func preprocess(src string) string {
	src = strings.TrimSuffix(src, "\n")
	src = lstripBlocks(src)
	src = trimBlocks(src)
	return stripGeneration(src)
}

// lstripBlocks removes spaces and tabs between a line start and "{#", "{%"
// or "{-". A line starts after any JavaScript line terminator.
func lstripBlocks(src string) string {
	var b strings.Builder
	lineStart := true
	for i := 0; i < len(src); {
		if lineStart {
			j := i
			for j < len(src) && (src[j] == ' ' || src[j] == '\t') {
				j++
			}
			if j+1 < len(src) && src[j] == '{' && (src[j+1] == '#' || src[j+1] == '%' || src[j+1] == '-') {
				i = j
			}
			lineStart = false
			continue
		}
		r, n := decodeRune(src[i:])
		b.WriteString(src[i : i+n])
		i += n
		lineStart = r == '\n' || r == '\r' || r == '\u2028' || r == '\u2029'
	}
	return b.String()
}

// trimBlocks removes the newline right after "#}", "%}" or "-}".
func trimBlocks(src string) string {
	var b strings.Builder
	for i := 0; i < len(src); i++ {
		b.WriteByte(src[i])
		if src[i] == '}' && i > 0 && (src[i-1] == '#' || src[i-1] == '%' || src[i-1] == '-') && i+1 < len(src) && src[i+1] == '\n' {
			i++
		}
	}
	return b.String()
}

// stripGeneration removes "{% generation %}" and "{% endgeneration %}"
// (any dash and inner whitespace) as the reference's regular expression
// /(\s*){%(-?)\s*(?:end)?generation\s*(-?)%}(\s*)/gs does.
func stripGeneration(src string) string {
	if !strings.Contains(src, "generation") {
		return src
	}
	var b strings.Builder
	i := 0
	for i < len(src) {
		k := strings.Index(src[i:], "{%")
		if k < 0 {
			break
		}
		open := i + k
		end, lstrip, rstrip, ok := matchGenerationTag(src, open)
		if !ok {
			b.WriteString(src[i : open+2])
			i = open + 2
			continue
		}
		// The leading \s* of the regex starts where the whitespace run before
		// the tag starts, but never before i (matches do not overlap).
		ws := open
		for ws > i {
			r, n := lastRune(src[i:ws])
			if !isJSSpace(r) {
				break
			}
			ws -= n
		}
		after := end
		for after < len(src) {
			r, n := decodeRune(src[after:])
			if !isJSSpace(r) {
				break
			}
			after += n
		}
		b.WriteString(src[i:ws])
		if !lstrip {
			b.WriteString(src[ws:open])
		}
		if !rstrip {
			b.WriteString(src[end:after])
		}
		i = after
	}
	b.WriteString(src[i:])
	return b.String()
}

func matchGenerationTag(src string, open int) (end int, lstrip, rstrip, ok bool) {
	j := open + 2
	if j < len(src) && src[j] == '-' {
		lstrip = true
		j++
	}
	j = skipJSSpace(src, j)
	if strings.HasPrefix(src[j:], "end") && strings.HasPrefix(src[j+3:], "generation") {
		j += 3
	}
	if !strings.HasPrefix(src[j:], "generation") {
		return 0, false, false, false
	}
	j = skipJSSpace(src, j+len("generation"))
	if j < len(src) && src[j] == '-' {
		rstrip = true
		j++
	}
	if !strings.HasPrefix(src[j:], "%}") {
		return 0, false, false, false
	}
	return j + 2, lstrip, rstrip, true
}

func skipJSSpace(s string, i int) int {
	for i < len(s) {
		r, n := decodeRune(s[i:])
		if !isJSSpace(r) {
			break
		}
		i += n
	}
	return i
}

// lexer turns a preprocessed template into tokens, following the
// reference's tokenize() step by step.
type lexer struct {
	src    []rune
	pos    int
	toks   []token
	curlys int
}

func tokenize(source string) ([]token, error) {
	lx := &lexer{src: []rune(preprocess(source))}
	if err := lx.run(); err != nil {
		return nil, err
	}
	return lx.toks, nil
}

func (lx *lexer) at(i int) rune {
	if i < len(lx.src) {
		return lx.src[i]
	}
	return -1
}

func (lx *lexer) hasPrefix(s string) bool {
	i := lx.pos
	for _, r := range s {
		if lx.at(i) != r {
			return false
		}
		i++
	}
	return true
}

func (lx *lexer) last() (tokType, bool) {
	if len(lx.toks) == 0 {
		return 0, false
	}
	return lx.toks[len(lx.toks)-1].typ, true
}

func (lx *lexer) push(val string, typ tokType) { lx.toks = append(lx.toks, token{val, typ}) }

// consumeWhile reads runes while pred holds, decoding backslash escapes the
// way the reference does for every consumeWhile (string literals need it).
func (lx *lexer) consumeWhile(pred func(rune) bool) (string, error) {
	var units []uint16
	for pred(lx.at(lx.pos)) {
		if lx.src[lx.pos] == '\\' {
			lx.pos++
			if lx.pos >= len(lx.src) {
				return "", fmt.Errorf("jinja: unexpected end of input")
			}
			esc := lx.src[lx.pos]
			lx.pos++
			if esc == 'x' || esc == 'u' {
				n := 2
				if esc == 'u' {
					n = 4
				}
				var code uint16
				for k := 0; k < n; k++ {
					d := hexDigit(lx.at(lx.pos + k))
					if d < 0 {
						return "", fmt.Errorf("jinja: invalid hexadecimal escape sequence")
					}
					code = code<<4 | uint16(d)
				}
				units = append(units, code)
				lx.pos += n
				continue
			}
			r, ok := escapes[esc]
			if !ok {
				return "", fmt.Errorf("jinja: unexpected escaped character: %c", esc)
			}
			units = append(units, uint16(r))
			continue
		}
		units = utf16.AppendRune(units, lx.src[lx.pos])
		lx.pos++
		if lx.pos >= len(lx.src) {
			return "", fmt.Errorf("jinja: unexpected end of input")
		}
	}
	return string(utf16.Decode(units)), nil
}

func hexDigit(r rune) int {
	switch {
	case r >= '0' && r <= '9':
		return int(r - '0')
	case r >= 'a' && r <= 'f':
		return int(r-'a') + 10
	case r >= 'A' && r <= 'F':
		return int(r-'A') + 10
	}
	return -1
}

func (lx *lexer) stripTrailingWhitespace() {
	if n := len(lx.toks); n > 0 && lx.toks[n-1].typ == tText {
		v := jsTrimEnd(lx.toks[n-1].val)
		if v == "" {
			lx.toks = lx.toks[:n-1]
		} else {
			lx.toks[n-1].val = v
		}
	}
}

func (lx *lexer) skipLeadingWhitespace() {
	for lx.pos < len(lx.src) && isJSSpace(lx.src[lx.pos]) {
		lx.pos++
	}
}

func (lx *lexer) run() error {
	for lx.pos < len(lx.src) {
		last, any := lx.last()
		if !any || last == tCloseStatement || last == tCloseExpression || last == tComment {
			start := lx.pos
			for lx.pos < len(lx.src) && !(lx.src[lx.pos] == '{' && (lx.at(lx.pos+1) == '%' || lx.at(lx.pos+1) == '{' || lx.at(lx.pos+1) == '#')) {
				lx.pos++
			}
			if lx.pos > start {
				lx.push(string(lx.src[start:lx.pos]), tText)
				continue
			}
		}
		if lx.hasPrefix("{#") {
			if err := lx.comment(); err != nil {
				return err
			}
			continue
		}
		if lx.hasPrefix("{%-") {
			lx.stripTrailingWhitespace()
			lx.push("{%", tOpenStatement)
			lx.pos += 3
			continue
		}
		if lx.hasPrefix("{{-") {
			lx.stripTrailingWhitespace()
			lx.push("{{", tOpenExpression)
			lx.curlys = 0
			lx.pos += 3
			continue
		}
		if _, err := lx.consumeWhile(isJSSpace); err != nil {
			return err
		}
		if lx.hasPrefix("-%}") {
			lx.push("%}", tCloseStatement)
			lx.pos += 3
			lx.skipLeadingWhitespace()
			continue
		}
		if lx.hasPrefix("-}}") {
			lx.push("}}", tCloseExpression)
			lx.pos += 3
			lx.skipLeadingWhitespace()
			continue
		}
		if err := lx.operand(); err != nil {
			return err
		}
	}
	return nil
}

func (lx *lexer) comment() error {
	lx.pos += 2
	stripBefore := lx.at(lx.pos) == '-'
	if stripBefore {
		lx.pos++
	}
	start := lx.pos
	for lx.at(lx.pos) != '#' || lx.at(lx.pos+1) != '}' {
		if lx.pos+2 >= len(lx.src) {
			return fmt.Errorf("jinja: missing end of comment tag")
		}
		lx.pos++
	}
	text := string(lx.src[start:lx.pos])
	stripAfter := strings.HasSuffix(text, "-")
	if stripAfter {
		text = text[:len(text)-1]
	}
	if stripBefore {
		lx.stripTrailingWhitespace()
	}
	lx.push(text, tComment)
	lx.pos += 2
	if stripAfter {
		lx.skipLeadingWhitespace()
	}
	return nil
}

// operand lexes one token inside a tag: a sign, a symbol, a string, a
// number or a word.
func (lx *lexer) operand() error {
	c := lx.at(lx.pos)
	if c == '-' || c == '+' {
		last, any := lx.last()
		if !any || last == tText {
			return fmt.Errorf("jinja: unexpected character: %c", c)
		}
		switch last {
		case tIdent, tNumber, tString, tCloseParen, tCloseBracket:
			// a binary operator: handled by the symbol table below
		default:
			lx.pos++
			num, err := lx.consumeWhile(isDigit)
			if err != nil {
				return err
			}
			if num != "" && lx.at(lx.pos) == '.' && isDigit(lx.at(lx.pos+1)) {
				lx.pos++
				frac, err := lx.consumeWhile(isDigit)
				if err != nil {
					return err
				}
				num += "." + frac
			}
			if num != "" {
				lx.push(string(c)+num, tNumber)
			} else {
				lx.push(string(c), tUnary)
			}
			return nil
		}
	}
	for _, s := range symbols {
		if s.seq == "}}" && lx.curlys > 0 {
			continue
		}
		if lx.hasPrefix(s.seq) {
			lx.push(s.seq, s.typ)
			switch s.typ {
			case tOpenExpression:
				lx.curlys = 0
			case tOpenCurly:
				lx.curlys++
			case tCloseCurly:
				lx.curlys--
			}
			lx.pos += len([]rune(s.seq))
			return nil
		}
	}
	if c == '\'' || c == '"' {
		lx.pos++
		s, err := lx.consumeWhile(func(r rune) bool { return r != c })
		if err != nil {
			return err
		}
		lx.push(s, tString)
		lx.pos++
		return nil
	}
	if isDigit(c) {
		num, err := lx.consumeWhile(isDigit)
		if err != nil {
			return err
		}
		if last, _ := lx.last(); last != tDot && lx.at(lx.pos) == '.' && isDigit(lx.at(lx.pos+1)) {
			lx.pos++
			frac, err := lx.consumeWhile(isDigit)
			if err != nil {
				return err
			}
			num += "." + frac
		}
		// jinja2's float_re: an exponent, with or without a fraction.
		if e := lx.at(lx.pos); e == 'e' || e == 'E' {
			k := lx.pos + 1
			if lx.at(k) == '+' || lx.at(k) == '-' {
				k++
			}
			if isDigit(lx.at(k)) {
				sign := string(lx.src[lx.pos+1 : k])
				lx.pos = k
				exp, err := lx.consumeWhile(isDigit)
				if err != nil {
					return err
				}
				num += "e" + sign + exp
			}
		}
		lx.push(num, tNumber)
		return nil
	}
	if isWordRune(c) {
		w, err := lx.consumeWhile(isWordRune)
		if err != nil {
			return err
		}
		lx.push(w, tIdent)
		return nil
	}
	return fmt.Errorf("jinja: unexpected character: %c", c)
}
