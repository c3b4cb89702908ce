package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// ErrUnsupported marks a tokenizer.json that uses a component this package
// does not implement; it fails at load, never silently at encode time.
var ErrUnsupported = errors.New("unsupported tokenizer component")

// MaxFileBytes bounds tokenizer.json.
const MaxFileBytes = 256 << 20

type fileJSON struct {
	AddedTokens   []AddedToken    `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         modelJSON       `json:"model"`
	PostProcessor json.RawMessage `json:"post_processor"`
}

type modelJSON struct {
	Type                    string            `json:"type"`
	Vocab                   map[string]int    `json:"vocab"`
	Merges                  []json.RawMessage `json:"merges"`
	UnkToken                *string           `json:"unk_token"`
	IgnoreMerges            bool              `json:"ignore_merges"`
	ByteFallback            bool              `json:"byte_fallback"`
	ContinuingSubwordPrefix *string           `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string           `json:"end_of_word_suffix"`
	Dropout                 *float64          `json:"dropout"`
}

// AddedToken is an entry of tokenizer.json's added_tokens.
type AddedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	Special    bool   `json:"special"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	SingleWord bool   `json:"single_word"`
}

type component struct {
	Type          string            `json:"type"`
	Normalizers   []json.RawMessage `json:"normalizers"`
	Pretokenizers []json.RawMessage `json:"pretokenizers"`
	Pattern       *struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Behavior       string `json:"behavior"`
	Invert         bool   `json:"invert"`
	AddPrefixSpace bool   `json:"add_prefix_space"`
	UseRegex       *bool  `json:"use_regex"`
}

// Load reads dir/tokenizer.json.
func Load(dir string) (*Tokenizer, error) {
	path := filepath.Join(dir, "tokenizer.json")
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if st.Size() > MaxFileBytes {
		return nil, fmt.Errorf("tokenizer: %s is %d bytes, more than %d", path, st.Size(), MaxFileBytes)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := FromJSON(data)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	return t, nil
}

// FromJSON builds a tokenizer from the contents of a tokenizer.json.
func FromJSON(data []byte) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, err
	}
	if f.Model.Type != "BPE" {
		return nil, fmt.Errorf("%w: model %q (only BPE)", ErrUnsupported, f.Model.Type)
	}
	if f.Model.Dropout != nil && *f.Model.Dropout != 0 {
		return nil, fmt.Errorf("%w: BPE dropout", ErrUnsupported)
	}
	if f.Model.ByteFallback {
		return nil, fmt.Errorf("%w: byte_fallback", ErrUnsupported)
	}
	if p := f.Model.ContinuingSubwordPrefix; p != nil && *p != "" {
		return nil, fmt.Errorf("%w: continuing_subword_prefix", ErrUnsupported)
	}
	if s := f.Model.EndOfWordSuffix; s != nil && *s != "" {
		return nil, fmt.Errorf("%w: end_of_word_suffix", ErrUnsupported)
	}
	t := &Tokenizer{unk: -1, ignoreMerges: f.Model.IgnoreMerges}
	if err := t.setVocab(f.Model.Vocab, f.AddedTokens); err != nil {
		return nil, err
	}
	if f.Model.UnkToken != nil {
		if id, ok := t.vocab[*f.Model.UnkToken]; ok {
			t.unk = id
		}
	}
	if err := t.setMerges(f.Model.Merges); err != nil {
		return nil, err
	}
	var err error
	if t.normalize, err = buildNormalizer(f.Normalizer); err != nil {
		return nil, err
	}
	if t.pre, err = buildPreTokenizer(f.PreTokenizer); err != nil {
		return nil, err
	}
	if err := checkByteLevelDecoder(f.Decoder); err != nil {
		return nil, err
	}
	t.cache = newCache()
	return t, nil
}

func isNull(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s == "" || s == "null"
}

func buildNormalizer(raw json.RawMessage) (func(string) string, error) {
	if isNull(raw) {
		return nil, nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	switch c.Type {
	case "NFC":
		return norm.NFC.String, nil
	case "NFD":
		return norm.NFD.String, nil
	case "NFKC":
		return norm.NFKC.String, nil
	case "NFKD":
		return norm.NFKD.String, nil
	case "Sequence":
		var fs []func(string) string
		for _, n := range c.Normalizers {
			f, err := buildNormalizer(n)
			if err != nil {
				return nil, err
			}
			if f != nil {
				fs = append(fs, f)
			}
		}
		return func(s string) string {
			for _, f := range fs {
				s = f(s)
			}
			return s
		}, nil
	}
	return nil, fmt.Errorf("%w: normalizer %q", ErrUnsupported, c.Type)
}

func buildPreTokenizer(raw json.RawMessage) ([]preStep, error) {
	if isNull(raw) {
		return nil, fmt.Errorf("%w: no pre-tokenizer (only byte-level BPE is supported)", ErrUnsupported)
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	var steps []preStep
	switch c.Type {
	case "Sequence":
		for _, p := range c.Pretokenizers {
			s, err := buildPreStep(p)
			if err != nil {
				return nil, err
			}
			steps = append(steps, s...)
		}
	default:
		s, err := buildPreStep(raw)
		if err != nil {
			return nil, err
		}
		steps = s
	}
	if len(steps) == 0 || !steps[len(steps)-1].byteLevel {
		return nil, fmt.Errorf("%w: the pre-tokenizer must end with ByteLevel", ErrUnsupported)
	}
	return steps, nil
}

// gpt2Pattern is ByteLevel's own split when use_regex is true.
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

func buildPreStep(raw json.RawMessage) ([]preStep, error) {
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	switch c.Type {
	case "Split":
		if c.Invert {
			return nil, fmt.Errorf("%w: inverted Split", ErrUnsupported)
		}
		if c.Behavior != "Isolated" {
			return nil, fmt.Errorf("%w: Split behavior %q", ErrUnsupported, c.Behavior)
		}
		if c.Pattern == nil || (c.Pattern.Regex == nil && c.Pattern.String == nil) {
			return nil, fmt.Errorf("%w: Split without a pattern", ErrUnsupported)
		}
		var re *splitter
		var err error
		if c.Pattern.Regex != nil {
			re, err = compileSplit(*c.Pattern.Regex)
		} else {
			re, err = compileSplit(regexpQuote(*c.Pattern.String))
		}
		if err != nil {
			return nil, err
		}
		return []preStep{{split: re}}, nil
	case "ByteLevel":
		var steps []preStep
		if c.UseRegex == nil || *c.UseRegex {
			re, err := compileSplit(gpt2Pattern)
			if err != nil {
				return nil, err
			}
			steps = append(steps, preStep{split: re, matchOnly: true})
		}
		return append(steps, preStep{byteLevel: true, addPrefixSpace: c.AddPrefixSpace}), nil
	}
	return nil, fmt.Errorf("%w: pre-tokenizer %q", ErrUnsupported, c.Type)
}

func checkByteLevelDecoder(raw json.RawMessage) error {
	if isNull(raw) {
		return fmt.Errorf("%w: no decoder", ErrUnsupported)
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return err
	}
	if c.Type != "ByteLevel" {
		return fmt.Errorf("%w: decoder %q (only ByteLevel)", ErrUnsupported, c.Type)
	}
	return nil
}
