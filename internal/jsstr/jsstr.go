// Package jsstr holds the JavaScript string rules that the reference
// implementations berth matches (transformers.js, @huggingface/jinja)
// inherit from their host language: which code points are whitespace, and
// how TextDecoder turns bytes that are not UTF-8 into text.
package jsstr

import (
	"strings"
	"unicode/utf8"
)

// IsSpace is JavaScript's \s and the set String.prototype.trim removes:
// WhiteSpace (with U+FEFF and every Zs) and LineTerminator.
func IsSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0xfeff:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

// Trim, TrimStart and TrimEnd are trim, trimStart and trimEnd.
func Trim(s string) string      { return strings.TrimFunc(s, IsSpace) }
func TrimStart(s string) string { return strings.TrimLeftFunc(s, IsSpace) }
func TrimEnd(s string) string   { return strings.TrimRightFunc(s, IsSpace) }

// DecodeUTF8 is TextDecoder("utf-8") without fatal: every maximal subpart
// of an ill-formed sequence becomes one U+FFFD (Go's conversions replace
// each bad byte instead, which gives more replacement characters).
func DecodeUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var out strings.Builder
	out.Grow(len(b))
	for i := 0; i < len(b); {
		c := b[i]
		if c < 0x80 {
			out.WriteByte(c)
			i++
			continue
		}
		need, lo, hi := 0, byte(0x80), byte(0xbf)
		switch {
		case c >= 0xc2 && c <= 0xdf:
			need = 1
		case c == 0xe0:
			need, lo = 2, 0xa0
		case c == 0xed:
			need, hi = 2, 0x9f
		case c >= 0xe1 && c <= 0xef:
			need = 2
		case c == 0xf0:
			need, lo = 3, 0x90
		case c == 0xf4:
			need, hi = 3, 0x8f
		case c >= 0xf1 && c <= 0xf3:
			need = 3
		default:
			out.WriteRune(utf8.RuneError)
			i++
			continue
		}
		j := i + 1
		ok := true
		for k := 0; k < need; k++ {
			if j >= len(b) || b[j] < lo || b[j] > hi {
				ok = false
				break
			}
			lo, hi = 0x80, 0xbf
			j++
		}
		if !ok {
			out.WriteRune(utf8.RuneError)
			i = j
			continue
		}
		out.Write(b[i:j])
		i = j
	}
	return out.String()
}
