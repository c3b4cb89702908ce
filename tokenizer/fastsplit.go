package tokenizer

// A hand-written splitter for the pre-tokenizer regex of the Qwen2/Qwen3
// (and, with \p{N}{1,3}, Llama 3) tokenizers: the regex engine cost about
// a third of a turn's server time. It decides a match only from ASCII
// bytes, where the classes are exact (\p{L} is A-Za-z, \p{N} is 0-9, \s
// is \t\n\v\f\r and space) and every Unicode version agrees; a match
// whose decision looked at any other byte is left to regexp2, from the same
// position (the pattern matches at every position, so matches chain
// without gaps either way). TestFastSplitEqualsRegex proves the result
// equal to the regex alone on random and corpus text.

const (
	qwenPattern   = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// fastSplit is the pattern's alternation, alternative by alternative, in
// the regex's leftmost-first order.
type fastSplit struct{ maxDigits int }

func recognize(pattern string) *fastSplit {
	switch pattern {
	case qwenPattern:
		return &fastSplit{maxDigits: 1}
	case llama3Pattern:
		return &fastSplit{maxDigits: 3}
	}
	return nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func aSpace(c byte) bool  { return c == ' ' || (c >= '\t' && c <= '\r') }
func aLetter(c byte) bool { return (c|0x20) >= 'a' && (c|0x20) <= 'z' }
func aDigit(c byte) bool  { return c >= '0' && c <= '9' }
func aPunct(c byte) bool  { return !aSpace(c) && !aLetter(c) && !aDigit(c) }
func aNL(c byte) bool     { return c == '\r' || c == '\n' }

// each yields the pieces of an ASCII string.
func (f *fastSplit) each(s string, yield func(string) error) error {
	for i := 0; i < len(s); {
		n, _ := f.match(s, i)
		if err := yield(s[i : i+n]); err != nil {
			return err
		}
		i += n
	}
	return nil
}

// matchASCII is match when every byte it looked at is ASCII.
func (f *fastSplit) matchASCII(s string, i int) (int, bool) {
	if s[i] >= 0x80 {
		return 0, false
	}
	n, seen := f.match(s, i)
	for k := i; k < seen && k < len(s); k++ {
		if s[k] >= 0x80 {
			return 0, false
		}
	}
	return n, true
}

// match is the length of the pattern's match at i (never 0: on ASCII every
// character starts some alternative), and the end of the bytes it looked at.
func (f *fastSplit) match(s string, i int) (n, seen int) {
	n = f.matchLen(s, i)
	seen = max(i+n+1, i+3)
	if aSpace(s[i]) { // the whitespace alternatives read the whole run and the byte after it
		end := i
		for end < len(s) && aSpace(s[end]) {
			end++
		}
		seen = max(seen, end+1)
	}
	return n, seen
}

func (f *fastSplit) matchLen(s string, i int) int {
	n := len(s)
	c := s[i]
	// 1: 's 't 're 've 'm 'll 'd, ASCII case-insensitive.
	if c == '\'' && i+1 < n {
		switch s[i+1] | 0x20 {
		case 's', 't', 'm', 'd':
			return 2
		case 'r', 'v':
			if i+2 < n && s[i+2]|0x20 == 'e' {
				return 3
			}
		case 'l':
			if i+2 < n && s[i+2]|0x20 == 'l' {
				return 3
			}
		}
	}
	// 2: an optional non-letter, non-digit, non-newline, then letters.
	j := i
	if !aLetter(c) && !aNL(c) && !aDigit(c) && i+1 < n && aLetter(s[i+1]) {
		j = i + 1
	}
	if aLetter(s[j]) {
		for j < n && aLetter(s[j]) {
			j++
		}
		return j - i
	}
	// 3: one digit (or up to maxDigits).
	if aDigit(c) {
		j = i
		for j < n && j-i < f.maxDigits && aDigit(s[j]) {
			j++
		}
		return j - i
	}
	// 4: an optional space, punctuation, then newlines.
	j = -1
	switch {
	case c == ' ' && i+1 < n && aPunct(s[i+1]):
		j = i + 1
	case aPunct(c):
		j = i
	}
	if j >= 0 {
		for j < n && aPunct(s[j]) {
			j++
		}
		for j < n && aNL(s[j]) {
			j++
		}
		return j - i
	}
	// c is whitespace from here on.
	end := i
	for end < n && aSpace(s[end]) {
		end++
	}
	// 5: whitespace up to and including its last newline.
	for k := end - 1; k >= i; k-- {
		if aNL(s[k]) {
			return k + 1 - i
		}
	}
	// 6: whitespace not followed by a non-space: all of it at the end of
	// the text, else all but the last.
	if end == n {
		return end - i
	}
	if end-1 > i {
		return end - 1 - i
	}
	// 7: the whitespace run.
	return end - i
}
