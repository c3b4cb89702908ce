package jinja

import (
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/collate"
	"golang.org/x/text/language"

	"github.com/berth-sh/berth/internal/jsstr"
)

// This file holds the pieces of JavaScript semantics the reference engine
// inherits from its host language: whitespace, number printing, UTF-16
// string indexing, loose and strict equality, case mapping.

func decodeRune(s string) (rune, int) { return utf8.DecodeRuneInString(s) }
func lastRune(s string) (rune, int)   { return utf8.DecodeLastRuneInString(s) }

func isJSSpace(r rune) bool       { return jsstr.IsSpace(r) }
func jsTrim(s string) string      { return jsstr.Trim(s) }
func jsTrimStart(s string) string { return jsstr.TrimStart(s) }
func jsTrimEnd(s string) string   { return jsstr.TrimEnd(s) }

var (
	upperCaser = cases.Upper(language.Und)
	lowerCaser = cases.Lower(language.Und)
)

// jsUpper and jsLower are toUpperCase and toLowerCase: full Unicode case
// mapping (ß becomes SS), not Go's per-rune mapping.
func jsUpper(s string) string { return upperCaser.String(s) }
func jsLower(s string) string { return lowerCaser.String(s) }

// jsNumber is Number.prototype.toString() for base 10.
func jsNumber(x float64) string {
	switch {
	case math.IsNaN(x):
		return "NaN"
	case x == 0:
		return "0"
	case math.IsInf(x, 1):
		return "Infinity"
	case math.IsInf(x, -1):
		return "-Infinity"
	case x < 0:
		return "-" + jsNumber(-x)
	}
	e := strconv.FormatFloat(x, 'e', -1, 64) // d.ddde±XX, shortest round trip
	mant, expPart, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	exp, _ := strconv.Atoi(expPart)
	k, n := len(digits), exp+1
	switch {
	case k <= n && n <= 21:
		return digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		return digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		return "0." + strings.Repeat("0", -n) + digits
	}
	sign := "+"
	if n-1 < 0 {
		sign = "-"
	}
	abs := n - 1
	if abs < 0 {
		abs = -abs
	}
	if k == 1 {
		return digits + "e" + sign + strconv.Itoa(abs)
	}
	return digits[:1] + "." + digits[1:] + "e" + sign + strconv.Itoa(abs)
}

// jsToFixed1 is x.toFixed(1) for an integral x.
func jsToFixed1(x float64) string {
	if math.Abs(x) >= 1e21 {
		return jsNumber(x)
	}
	return strconv.FormatFloat(x, 'f', 1, 64)
}

// writeJSONString is JSON.stringify for a string, with the reference's
// ensure_ascii rewrite of every UTF-16 unit from 0x7f up.
func writeJSONString(b *strings.Builder, s string, ensureASCII bool) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			switch {
			case r < 0x20:
				b.WriteString(`\u00`)
				b.WriteByte(hex[r>>4])
				b.WriteByte(hex[r&0xf])
			case ensureASCII && r >= 0x7f:
				var units []uint16
				units = utf16.AppendRune(units, r)
				for _, u := range units {
					b.WriteString(`\u`)
					for sh := 12; sh >= 0; sh -= 4 {
						b.WriteByte(hex[(u>>sh)&0xf])
					}
				}
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// utf16Len is a JavaScript string's length.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n++
		if r > 0xffff {
			n++
		}
	}
	return n
}

// utf16At is String.prototype.at: one UTF-16 unit (a lone surrogate
// becomes U+FFFD, which Go strings cannot hold otherwise).
func utf16At(s string, i int) (string, bool) {
	units := utf16.Encode([]rune(s))
	if i < 0 {
		i += len(units)
	}
	if i < 0 || i >= len(units) {
		return "", false
	}
	return string(utf16.Decode(units[i : i+1])), true
}

// utf16Less orders strings as JavaScript's < does: by UTF-16 units.
func utf16Less(a, b string) bool {
	ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	for i := 0; i < len(ua) && i < len(ub); i++ {
		if ua[i] != ub[i] {
			return ua[i] < ub[i]
		}
	}
	return len(ua) < len(ub)
}

var localeCollator = collate.New(language.Und)

// sortedByLocale orders keys as localeCompare does (the root collation).
func sortedByLocale(keys []string) []string {
	out := append([]string(nil), keys...)
	sort.SliceStable(out, func(i, j int) bool { return localeCollator.CompareString(out[i], out[j]) < 0 })
	return out
}

var (
	jsDecimal = regexp.MustCompile(`^[+-]?(Infinity|[0-9]+\.?[0-9]*([eE][+-]?[0-9]+)?|\.[0-9]+([eE][+-]?[0-9]+)?)`)
	jsRadix   = regexp.MustCompile(`^0([xX][0-9a-fA-F]+|[oO][0-7]+|[bB][01]+)$`)
)

// stringToNumber is JavaScript's ToNumber applied to a string.
func stringToNumber(s string) float64 {
	s = jsTrim(s)
	if s == "" {
		return 0
	}
	if m := jsRadix.FindString(s); m != "" {
		base := map[byte]int{'x': 16, 'X': 16, 'o': 8, 'O': 8, 'b': 2, 'B': 2}[s[1]]
		v, err := strconv.ParseUint(s[2:], base, 64)
		if err != nil {
			return math.NaN()
		}
		return float64(v)
	}
	if m := jsDecimal.FindString(s); m == s {
		return parseDecimal(m)
	}
	return math.NaN()
}

func parseDecimal(m string) float64 {
	switch strings.TrimLeft(m, "+-") {
	case "Infinity":
		if strings.HasPrefix(m, "-") {
			return math.Inf(-1)
		}
		return math.Inf(1)
	}
	v, _ := strconv.ParseFloat(m, 64) // range errors give ±Inf or 0, as in JavaScript
	return v
}

// jsParseFloat is parseFloat: the longest decimal prefix after leading
// whitespace, NaN without one.
func jsParseFloat(s string) float64 {
	m := jsDecimal.FindString(jsTrimStart(s))
	if m == "" || m == "+" || m == "-" {
		return math.NaN()
	}
	return parseDecimal(m)
}

// jsParseInt is parseInt(s, 10).
func jsParseInt(s string) float64 {
	s = jsTrimStart(s)
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return math.NaN()
	}
	v, _ := strconv.ParseFloat(s[:i], 64)
	if neg {
		v = -v
	}
	return v
}

// jsKind groups runtime kinds into the JavaScript types of their values.
func jsKind(v Value) Kind {
	switch v.kind {
	case Float:
		return Int
	case Tuple:
		return Array
	case KwArgs, Namespace:
		return Object
	}
	return v.kind
}

// strictEq is === on the wrapped JavaScript values.
func strictEq(a, b Value) bool {
	if jsKind(a) != jsKind(b) {
		return false
	}
	switch jsKind(a) {
	case Undefined, Null:
		return true
	case Bool:
		return a.b == b.b
	case Int:
		return a.n == b.n
	case String:
		return a.s == b.s
	case Array:
		return a.arr == b.arr
	case Object:
		return a.obj == b.obj
	case Func:
		return a.fn == b.fn
	}
	return false
}

// looseEq is == on the wrapped JavaScript values.
func looseEq(a, b Value) bool {
	ka, kb := jsKind(a), jsKind(b)
	if ka == kb {
		return strictEq(a, b)
	}
	nullish := func(k Kind) bool { return k == Undefined || k == Null }
	if nullish(ka) || nullish(kb) {
		return nullish(ka) && nullish(kb)
	}
	if ka == Bool {
		return looseEq(numberValue(boolNum(a.b)), b)
	}
	if kb == Bool {
		return looseEq(a, numberValue(boolNum(b.b)))
	}
	if ka == Int && kb == String {
		return a.n == stringToNumber(b.s)
	}
	if ka == String && kb == Int {
		return stringToNumber(a.s) == b.n
	}
	// An object against a number or string compares its primitive.
	prim := func(v Value) (Value, bool) {
		s, err := v.jsString()
		return StringValue(s), err == nil
	}
	if (ka == Array || ka == Object) && (kb == Int || kb == String) {
		p, ok := prim(a)
		return ok && looseEq(p, b)
	}
	if (kb == Array || kb == Object) && (ka == Int || ka == String) {
		p, ok := prim(b)
		return ok && looseEq(a, p)
	}
	return false
}

func boolNum(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// sameValueZero is what a JavaScript Set uses (the unique filter).
func sameValueZero(a, b Value) bool {
	if jsKind(a) == Int && jsKind(b) == Int && math.IsNaN(a.n) && math.IsNaN(b.n) {
		return true
	}
	return strictEq(a, b)
}
