package jinja

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"

	"github.com/berth-sh/berth/internal/jsstr"
)

// Text helpers under the template syntax and the printing: rune decoding,
// the lexer's whitespace, full Unicode case mapping, JSON string escaping.

func decodeRune(s string) (rune, int) { return utf8.DecodeRuneInString(s) }
func lastRune(s string) (rune, int)   { return utf8.DecodeLastRuneInString(s) }

func isJSSpace(r rune) bool     { return jsstr.IsSpace(r) }
func jsTrimEnd(s string) string { return jsstr.TrimEnd(s) }

var (
	upperCaser = cases.Upper(language.Und)
	lowerCaser = cases.Lower(language.Und)
)

// jsUpper and jsLower are full Unicode case mapping (ß becomes SS), as
// Python's str.upper and str.lower, not Go's per-rune mapping.
func jsUpper(s string) string { return upperCaser.String(s) }
func jsLower(s string) string { return lowerCaser.String(s) }

// writeJSONString is json.dumps for a string: the quote, the backslash and
// control characters escaped, and with ensureASCII every character from
// 0x7f up written as \u escapes of its UTF-16 units.
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

func boolNum(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
