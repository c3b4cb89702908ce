package jinja

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"
)

// Python's string methods as jinja2 calls them on a template's strings.

// pyIsSpace is str.isspace for one character: the characters of
// bidirectional class WS, B or S and the space separators.
func pyIsSpace(r rune) bool {
	switch {
	case r >= '\t' && r <= '\r', r >= 0x1c && r <= 0x1f, r == ' ', r == 0x85, r == 0xa0, r == 0x1680,
		r >= 0x2000 && r <= 0x200a, r == 0x2028, r == 0x2029, r == 0x202f, r == 0x205f, r == 0x3000:
		return true
	}
	return false
}

// pyStrip is str.strip, lstrip and rstrip: chars nil strips whitespace,
// else any of the characters of *chars.
func pyStrip(s string, chars *string, left, right bool) string {
	cut := pyIsSpace
	if chars != nil {
		set := *chars
		cut = func(r rune) bool { return strings.ContainsRune(set, r) }
	}
	if left {
		s = strings.TrimLeftFunc(s, cut)
	}
	if right {
		s = strings.TrimRightFunc(s, cut)
	}
	return s
}

var titleCaser = cases.Title(language.Und, cases.NoLower)

// titleRune is a character's full title-case mapping ("ß" becomes "Ss").
func titleRune(r rune) string { return titleCaser.String(string(r)) }

func isCased(r rune) bool { return unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r) }

// pyTitle is str.title: a cased character after an uncased one (a digit
// included) is title-cased, every other cased character lower-cased.
func pyTitle(s string) string {
	var b strings.Builder
	prevCased := false
	for _, r := range s {
		switch {
		case !isCased(r):
			b.WriteRune(r)
			prevCased = false
		case prevCased:
			b.WriteString(jsLower(string(r)))
		default:
			b.WriteString(titleRune(r))
			prevCased = true
		}
	}
	return b.String()
}

// pyCapitalize is str.capitalize: the first character title-cased, the
// rest lower-cased.
func pyCapitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return titleRune(r) + jsLower(s[n:])
}

// titleFilter is jinja2's title filter (not str.title): the text is cut
// before and after runs of "-", whitespace, "(", "{", "[" and "<", and each
// piece's first character is upper-cased and the rest lower-cased.
func titleFilter(s string) string {
	isSep := func(r rune) bool { return strings.ContainsRune("-({[<", r) || unicode.IsSpace(r) || pyIsSpace(r) }
	var b strings.Builder
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		sep := isSep(r)
		end := n
		for end < len(s) {
			r2, n2 := utf8.DecodeRuneInString(s[end:])
			if isSep(r2) != sep {
				break
			}
			end += n2
		}
		piece := s[:end]
		if sep {
			b.WriteString(piece)
		} else {
			b.WriteString(jsUpper(string(r)) + jsLower(piece[n:]))
		}
		s = s[end:]
	}
	return b.String()
}

// runeAt is s[i] on code points; a negative i counts from the end.
func runeAt(s string, i int) (string, bool) {
	runes := []rune(s)
	if i < 0 {
		i += len(runes)
	}
	if i < 0 || i >= len(runes) {
		return "", false
	}
	return string(runes[i]), true
}

// numberFilter is jinja2's int and float filters: int(x), else
// int(float(x)), else the default (0 or 0.0 when def is the zero Value);
// float(x), else the default.
func numberFilter(v Value, name string, def Value) Value {
	if def.kind == Undefined {
		def = IntValue(0)
		if name == "float" {
			def = FloatValue(0)
		}
	}
	var f float64
	switch v.kind {
	case Int, Float, Bool:
		f, _ = pyNumber(v)
		if name == "int" && v.kind == Int {
			return v
		}
	case String:
		t := strings.TrimFunc(v.s, pyIsSpace)
		if i, err := strconv.ParseInt(t, 10, 64); err == nil && name == "int" {
			return IntValue(i)
		}
		var ok bool
		if f, ok = pyFloatOf(t); !ok {
			return def
		}
	default:
		return def
	}
	if name == "float" {
		return FloatValue(f)
	}
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return def
	}
	return numberValue(math.Trunc(f))
}

// pyFloatOf is float(s) (0.0 and false when Python would raise).
func pyFloatOf(s string) (float64, bool) {
	t := strings.TrimFunc(s, pyIsSpace)
	if strings.ContainsAny(t, "xXpP_") { // Go reads hex floats and underscores; Python's float() does not
		return 0, false
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, false
	}
	return f, true
}
