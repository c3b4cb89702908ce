package tokenizer

import (
	"fmt"
	"strings"

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

// pieces splits s: matches and the text between them, in order (the
// reference's regexSplit), or only the matches when matchOnly.
func (sp *splitter) pieces(s string, matchOnly bool, out []string) ([]string, error) {
	if sp.fast != nil {
		if isASCII(s) {
			return sp.fast.split(s, out), nil
		}
		return sp.hybridPieces(s, out)
	}
	return sp.regexPieces(s, matchOnly, out)
}

// hybridPieces takes each match from the hand-written splitter when it
// decided on ASCII alone, else the regex's match at the same position.
func (sp *splitter) hybridPieces(s string, out []string) ([]string, error) {
	var runes []rune
	var runeAt, byteAt []int
	for i := 0; i < len(s); {
		if n, ok := sp.fast.matchASCII(s, i); ok {
			out = append(out, s[i:i+n])
			i += n
			continue
		}
		if runes == nil {
			runes = []rune(s)
			byteAt = runeByteOffsets(s, runes)
			runeAt = make([]int, len(s)+1)
			for r, b := range byteAt {
				runeAt[b] = r
			}
		}
		m, err := sp.re.FindRunesMatchStartingAt(runes, runeAt[i])
		if err != nil {
			return nil, fmt.Errorf("tokenizer: pre-tokenizer: %w", err)
		}
		if m == nil || m.RuneIndex != runeAt[i] || m.RuneLength == 0 {
			return nil, fmt.Errorf("tokenizer: pre-tokenizer: no match at %d", i)
		}
		end := byteAt[m.RuneIndex+m.RuneLength]
		out = append(out, s[i:end])
		i = end
	}
	return out, nil
}

func (sp *splitter) regexPieces(s string, matchOnly bool, out []string) ([]string, error) {
	runes := []rune(s)
	prev := 0
	byteOff := runeByteOffsets(s, runes)
	err := sp.re.FindRunesMatches(runes, 0, func(v regexp2.MatchView) bool {
		idx, n, ok := v.GroupRange(0)
		if !ok {
			return true
		}
		if !matchOnly && prev < idx {
			out = append(out, s[byteOff[prev]:byteOff[idx]])
		}
		if n > 0 {
			out = append(out, s[byteOff[idx]:byteOff[idx+n]])
		}
		prev = idx + n
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("tokenizer: pre-tokenizer: %w", err)
	}
	if !matchOnly && prev < len(runes) {
		out = append(out, s[byteOff[prev]:])
	}
	return out, nil
}

// runeByteOffsets maps rune index to byte offset (with one entry past the end).
func runeByteOffsets(s string, runes []rune) []int {
	off := make([]int, 0, len(runes)+1)
	for i := range s {
		off = append(off, i)
	}
	return append(off, len(s))
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
