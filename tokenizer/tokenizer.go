package tokenizer

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/berth-sh/berth/internal/jsstr"
)

// Tokenizer is a loaded tokenizer.json. It is safe for concurrent use.
type Tokenizer struct {
	vocab        map[string]int
	tokens       []string // by id; "" for holes
	longest      int      // bytes of the longest vocabulary token
	byteID       [256]int32
	merges       map[uint64]merge
	ignoreMerges bool
	unk          int

	added     []AddedToken
	addedByID map[int]*AddedToken
	trie      []trieNode
	starts    [256]bool // the first bytes of added tokens
	special   map[int]bool

	normalize func(string) string
	pre       []preStep
	cache     *cache
}

// trieNode is a node of the byte trie over added tokens' contents.
type trieNode struct {
	next  map[byte]int32
	added int32 // index into added, or -1
}

func (t *Tokenizer) setVocab(vocab map[string]int, added []AddedToken) error {
	t.vocab = make(map[string]int, len(vocab)+len(added))
	maxID := -1
	for tok, id := range vocab {
		if id < 0 || id > 1<<24 {
			return fmt.Errorf("vocab id %d out of range", id)
		}
		t.vocab[tok] = id
		maxID = max(maxID, id)
	}
	for _, a := range added {
		if a.ID < 0 || a.ID > 1<<24 || a.Content == "" {
			return fmt.Errorf("bad added token %d %q", a.ID, a.Content)
		}
		t.vocab[a.Content] = a.ID
		maxID = max(maxID, a.ID)
	}
	t.tokens = make([]string, maxID+1)
	for tok, id := range vocab {
		t.tokens[id] = tok
		t.longest = max(t.longest, utf8.RuneCountInString(tok)) // a rune of the byte-level alphabet is a byte
	}
	t.added = added
	t.addedByID = map[int]*AddedToken{}
	t.special = map[int]bool{}
	t.trie = []trieNode{{added: -1}}
	for i := range added {
		a := &t.added[i]
		t.tokens[a.ID] = a.Content
		t.addedByID[a.ID] = a
		if a.Special {
			t.special[a.ID] = true
		}
		t.starts[a.Content[0]] = true
		n := int32(0)
		for j := 0; j < len(a.Content); j++ {
			c := a.Content[j]
			if t.trie[n].next == nil {
				t.trie[n].next = map[byte]int32{}
			}
			nx, ok := t.trie[n].next[c]
			if !ok {
				nx = int32(len(t.trie))
				t.trie = append(t.trie, trieNode{added: -1})
				t.trie[n].next[c] = nx
			}
			n = nx
		}
		t.trie[n].added = int32(i)
	}
	for b := 0; b < 256; b++ {
		id, ok := t.vocab[string(byteToRune[b])]
		if !ok {
			return fmt.Errorf("%w: byte %#x has no byte-level token", ErrUnsupported, b)
		}
		t.byteID[b] = int32(id)
	}
	return nil
}

// section is a piece of input: an added token (added >= 0) or text.
type section struct {
	text  string
	added int
}

// splitAdded cuts text at added tokens, leftmost longest.
func (t *Tokenizer) splitAdded(text string) []section {
	var out []section
	start := 0
	for i := 0; i < len(text); {
		if !t.starts[text[i]] { // a table, not the trie's map: this runs for every byte of the text
			i++
			continue
		}
		n, match, end := int32(0), int32(-1), 0
		for j := i; j < len(text); j++ {
			nx, ok := t.trie[n].next[text[j]]
			if !ok {
				break
			}
			n = nx
			if t.trie[n].added >= 0 {
				match, end = t.trie[n].added, j+1
			}
		}
		if match < 0 {
			i++
			continue
		}
		if i > start {
			out = append(out, section{text: text[start:i], added: -1})
		}
		out = append(out, section{text: text[i:end], added: int(match)})
		i, start = end, end
	}
	if start < len(text) {
		out = append(out, section{text: text[start:], added: -1})
	}
	return out
}

// trim strips a neighbour of an lstrip or rstrip token; an added token
// that loses characters is plain text from then on, as in the reference.
func trim(s *section, f func(string) string) {
	if t := f(s.text); t != s.text {
		s.text, s.added = t, -1
	}
}

// EncodeLimit's refusals.
var (
	// ErrTooManyTokens: the text has more ids than the limit.
	ErrTooManyTokens = errors.New("tokenizer: more tokens than the limit")
	// ErrPieceTooLong: a pre-token (a run of letters, of spaces, of
	// punctuation) is longer than MaxPieceBytes.
	ErrPieceTooLong = errors.New("tokenizer: a pre-token is too long")
)

// MaxPieceBytes bounds one pre-token in EncodeLimit. Merging a piece
// costs about 40 bytes of memory and a heap operation per byte of it, all
// at once: a 29 MB run of one letter took 70 s and 1.2 GB. No text of a
// conversation has such a word; a hostile one does.
const MaxPieceBytes = 1 << 20

// Encode returns the ids of text, adding no special tokens.
func (t *Tokenizer) Encode(text string) ([]int, error) {
	return t.encode(text, math.MaxInt, math.MaxInt)
}

// EncodeLimit is Encode for at most limit ids: past them it stops with
// ErrTooManyTokens, so that a text far over a caller's bound costs about
// what the bound allows, not what the text would. It also refuses a piece
// longer than MaxPieceBytes (ErrPieceTooLong).
func (t *Tokenizer) EncodeLimit(text string, limit int) ([]int, error) {
	return t.encode(text, max(limit, 0), MaxPieceBytes)
}

func (t *Tokenizer) encode(text string, limit, maxPiece int) ([]int, error) {
	secs := t.splitAdded(text)
	for i, s := range secs {
		if s.added < 0 {
			continue
		}
		a := t.added[s.added]
		if a.LStrip && i > 0 {
			trim(&secs[i-1], jsstr.TrimEnd)
		}
		if a.RStrip && i+1 < len(secs) {
			trim(&secs[i+1], jsstr.TrimStart)
		}
	}
	e := &encoder{t: t, limit: limit, maxPiece: maxPiece, ids: make([]int, 0, min(len(text)/3, limit)+1)}
	for _, s := range secs {
		if s.text == "" {
			continue
		}
		if s.added >= 0 {
			if err := e.add(t.added[s.added].ID); err != nil {
				return nil, err
			}
			continue
		}
		x := s.text
		if t.normalize != nil {
			if x = t.normalize(x); x == "" {
				continue
			}
		}
		if err := e.piece(x, 0); err != nil {
			return nil, err
		}
	}
	return e.ids, nil
}

// encoder runs pieces through the pre-tokenizer and BPE as the splitters
// find them, so that no list of a whole section's pieces is ever built and
// the work stops at the limit.
type encoder struct {
	t               *Tokenizer
	limit, maxPiece int
	ids             []int
}

func (e *encoder) tooMany() error { return fmt.Errorf("%w (%d)", ErrTooManyTokens, e.limit) }

func (e *encoder) add(id int) error {
	if len(e.ids) >= e.limit {
		return e.tooMany()
	}
	e.ids = append(e.ids, id)
	return nil
}

// piece splits p with the pre-tokenizer's steps from k on and encodes what
// the last one yields.
func (e *encoder) piece(p string, k int) error {
	pre := e.t.pre
	for k < len(pre) && pre[k].split == nil {
		k++
	}
	if k < len(pre) {
		return pre[k].split.each(p, pre[k].matchOnly, func(q string) error { return e.piece(q, k+1) })
	}
	if pre[len(pre)-1].addPrefixSpace && !strings.HasPrefix(p, " ") {
		p = " " + p
	}
	switch {
	case p == "":
		return nil
	case len(p) > e.maxPiece:
		return fmt.Errorf("%w: %d bytes, more than %d", ErrPieceTooLong, len(p), e.maxPiece)
	case len(e.ids)+(len(p)+e.t.longest-1)/e.t.longest > e.limit:
		return e.tooMany() // its fewest ids, each the longest token, would pass the limit
	}
	if e.ids = e.t.bpe(p, e.ids); len(e.ids) > e.limit {
		return e.tooMany()
	}
	return nil
}

// Decode turns ids into text: added tokens verbatim, the others through
// the byte-level alphabet and UTF-8 (ill-formed bytes become U+FFFD).
// With skipSpecial, special tokens are left out.
func (t *Tokenizer) Decode(ids []int, skipSpecial bool) (string, error) {
	var out strings.Builder
	var buf []byte
	flush := func() {
		if len(buf) > 0 {
			out.WriteString(jsstr.DecodeUTF8(buf))
			buf = buf[:0]
		}
	}
	for _, id := range ids {
		if id < 0 || id >= len(t.tokens) || t.tokens[id] == "" {
			return "", fmt.Errorf("tokenizer: unknown token id %d", id)
		}
		if skipSpecial && t.special[id] {
			continue
		}
		if a, ok := t.addedByID[id]; ok {
			flush()
			out.WriteString(a.Content)
			continue
		}
		for _, r := range t.tokens[id] {
			buf = append(buf, runeToByte[r]) // a rune outside the alphabet reads as 0, as in the reference
		}
	}
	flush()
	return out.String(), nil
}

// TokenID returns the id of a token (a vocabulary entry or an added token).
func (t *Tokenizer) TokenID(tok string) (int, bool) {
	id, ok := t.vocab[tok]
	return id, ok
}

// Token returns the token string of id.
func (t *Tokenizer) Token(id int) (string, bool) {
	if id < 0 || id >= len(t.tokens) || t.tokens[id] == "" {
		return "", false
	}
	return t.tokens[id], true
}

// IsSpecial reports whether id is a special added token.
func (t *Tokenizer) IsSpecial(id int) bool { return t.special[id] }

// SpecialIDs returns the special token ids, ascending.
func (t *Tokenizer) SpecialIDs() []int {
	out := make([]int, 0, len(t.special))
	for id := range t.special {
		out = append(out, id)
	}
	sort.Ints(out)
	return out
}

// AddedTokens returns the added tokens of tokenizer.json.
func (t *Tokenizer) AddedTokens() []AddedToken { return append([]AddedToken(nil), t.added...) }

// VocabSize is one more than the largest id.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }
