package tokenizer

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
)

// preStep is one pre-tokenizer stage applied to every piece.
type preStep struct {
	split          *splitter
	matchOnly      bool // keep only the matches (ByteLevel's own regex)
	byteLevel      bool // map bytes to the byte-level alphabet
	addPrefixSpace bool
}

type splitter struct {
	re   *regexp2.Regexp
	fast *fastSplit // the same pattern by hand, for ASCII text; nil for other patterns
}

// jsCompat rewrites what the reference rewrites before building its
// JavaScript RegExp: inline case-insensitive groups, which JavaScript lacks.
var jsCompat = strings.NewReplacer(
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)`, `(?:'([sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD]))`,
)

// compileSplit compiles a tokenizer.json Split regex with JavaScript's
// semantics (regexp2's ECMAScript mode with the u flag), as the reference
// compiles it with new RegExp(pattern, "gu").
func compileSplit(pattern string) (*splitter, error) {
	fast := recognize(pattern)
	pattern = jsCompat.Replace(pattern)
	// Backtracking depth grows with whitespace runs; inputs are bounded by
	// the caller, so the engine's own cap would only fail them.
	re, err := regexp2.Compile(pattern, regexp2.ECMAScript|regexp2.Unicode, regexp2.OptionMaxBacktrackingStackSize(-1))
	if err != nil {
		return nil, fmt.Errorf("%w: pre-tokenizer regex %q: %v", ErrUnsupported, pattern, err)
	}
	return &splitter{re: re, fast: fast}, nil
}

func regexpQuote(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`.*+?^${}()|[]\/`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// each yields the pieces of s in order: matches and the text between them
// (the reference's regexSplit), or only the matches when matchOnly. It
// stops at the first error yield returns and returns it.
func (sp *splitter) each(s string, matchOnly bool, yield func(string) error) error {
	if sp.fast != nil {
		if isASCII(s) {
			return sp.fast.each(s, yield)
		}
		return sp.hybrid(s, yield)
	}
	return sp.regex(s, matchOnly, yield)
}

// hybrid takes each match from the hand-written splitter when it decided
// on ASCII alone, else the regex's match at the same position. The runes
// are made once, at the first match the regex must decide; rune and byte
// positions then advance together, so nothing else grows with s.
func (sp *splitter) hybrid(s string, yield func(string) error) error {
	var runes []rune
	r := 0 // the rune index of byte i, once runes exist
	for i := 0; i < len(s); {
		if n, ok := sp.fast.matchASCII(s, i); ok {
			if err := yield(s[i : i+n]); err != nil {
				return err
			}
			if runes != nil {
				r += n // ASCII: one rune a byte
			}
			i += n
			continue
		}
		if runes == nil {
			runes = []rune(s)
			r = utf8.RuneCountInString(s[:i])
		}
		m, err := sp.re.FindRunesMatchStartingAt(runes, r)
		if err != nil {
			return fmt.Errorf("tokenizer: pre-tokenizer: %w", err)
		}
		if m == nil || m.RuneIndex != r || m.RuneLength == 0 {
			return fmt.Errorf("tokenizer: pre-tokenizer: no match at %d", i)
		}
		end := skipRunes(s, i, m.RuneLength)
		if err := yield(s[i:end]); err != nil {
			return err
		}
		i, r = end, r+m.RuneLength
	}
	return nil
}

// skipRunes is the byte offset n runes after byte at, counting as []rune
// does (an invalid byte is one rune).
func skipRunes(s string, at, n int) int {
	for ; n > 0; n-- {
		_, size := utf8.DecodeRuneInString(s[at:])
		at += size
	}
	return at
}

func (sp *splitter) regex(s string, matchOnly bool, yield func(string) error) error {
	runes := []rune(s)
	prev, prevByte := 0, 0 // rune and byte index of the end of the last match
	var yerr error
	err := sp.re.FindRunesMatches(runes, 0, func(v regexp2.MatchView) bool {
		idx, n, ok := v.GroupRange(0)
		if !ok {
			return true
		}
		at := skipRunes(s, prevByte, idx-prev)
		end := skipRunes(s, at, n)
		if !matchOnly && prev < idx {
			if yerr = yield(s[prevByte:at]); yerr != nil {
				return false
			}
		}
		if n > 0 {
			if yerr = yield(s[at:end]); yerr != nil {
				return false
			}
		}
		prev, prevByte = idx+n, end
		return true
	})
	if yerr != nil {
		return yerr
	}
	if err != nil {
		return fmt.Errorf("tokenizer: pre-tokenizer: %w", err)
	}
	if !matchOnly && prev < len(runes) {
		return yield(s[prevByte:])
	}
	return nil
}

// bytesToUnicode is GPT-2's byte-level alphabet: printable bytes map to
// themselves, the others to code points from 256 on.
var byteToRune, runeToByte = func() ([256]rune, map[rune]byte) {
	var b2r [256]rune
	r2b := map[rune]byte{}
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff) {
			b2r[b] = rune(b)
		} else {
			b2r[b] = rune(256 + n)
			n++
		}
		r2b[b2r[b]] = byte(b)
	}
	return b2r, r2b
}()
