package tokenizer

import (
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
)

// tiny builds a tokenizer.json with the 256 byte-level tokens (ids 0-255
// in byte order), the given merges and added tokens.
func tiny(t *testing.T, merges [][2]string, added []AddedToken, mutate func(map[string]any)) *Tokenizer {
	t.Helper()
	vocab := map[string]int{}
	for b := 0; b < 256; b++ {
		vocab[string(byteToRune[b])] = b
	}
	var ms [][]string
	for _, m := range merges {
		if _, ok := vocab[m[0]+m[1]]; !ok {
			vocab[m[0]+m[1]] = len(vocab)
		}
		ms = append(ms, []string{m[0], m[1]})
	}
	doc := map[string]any{
		"added_tokens": added,
		"normalizer":   map[string]any{"type": "NFC"},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `\s+(?!\S)|\s+|[^\s]+`}, "behavior": "Isolated"},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": false},
		}},
		"decoder": map[string]any{"type": "ByteLevel"},
		"model":   map[string]any{"type": "BPE", "vocab": vocab, "merges": ms},
	}
	if mutate != nil {
		mutate(doc)
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := FromJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func encode(t *testing.T, tk *Tokenizer, s string) []string {
	t.Helper()
	ids, err := tk.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i], _ = tk.Token(id)
	}
	return out
}

func TestMergesByRankThenLeftmost(t *testing.T) {
	// "b c" outranks "a b": in "abc" the right pair merges first although
	// the left one comes first in the text.
	tk := tiny(t, [][2]string{{"b", "c"}, {"a", "b"}, {"a", "a"}}, nil, nil)
	if got := encode(t, tk, "abc"); !slices.Equal(got, []string{"a", "bc"}) {
		t.Errorf("abc = %q", got)
	}
	// Equal ranks: the leftmost pair wins, so "aaa" is "aa"+"a", not "a"+"aa".
	if got := encode(t, tk, "aaa"); !slices.Equal(got, []string{"aa", "a"}) {
		t.Errorf("aaa = %q", got)
	}
	if got := encode(t, tk, "aaaa"); !slices.Equal(got, []string{"aa", "aa"}) {
		t.Errorf("aaaa = %q", got)
	}
}

func TestAddedTokensLeftmostLongestAndStrip(t *testing.T) {
	added := []AddedToken{
		{ID: 300, Content: "<|a|>", Special: true},
		{ID: 301, Content: "<|a|>x", Special: false},
		{ID: 302, Content: "<L>", LStrip: true},
		{ID: 303, Content: "<R>", RStrip: true},
	}
	tk := tiny(t, nil, added, nil)
	ids, _ := tk.Encode("q<|a|>xy<|a|>")
	if want := []int{'q', 301, 'y', 300}; !slices.Equal(ids, want) {
		t.Errorf("leftmost longest: %v, want %v", ids, want)
	}
	// lstrip eats the whitespace before the token, rstrip the whitespace after.
	ids, _ = tk.Encode("a \t<L>b<R>  \nc")
	if want := []int{'a', 302, 'b', 303, 'c'}; !slices.Equal(ids, want) {
		t.Errorf("strip: %v, want %v", ids, want)
	}
	if !tk.IsSpecial(300) || tk.IsSpecial(301) || !slices.Equal(tk.SpecialIDs(), []int{300}) {
		t.Error("special flags")
	}
	s, _ := tk.Decode([]int{'q', 300, 301}, true)
	if s != "q<|a|>x" {
		t.Errorf("skipSpecial decode = %q", s)
	}
}

func TestNormalizerComposes(t *testing.T) {
	tk := tiny(t, nil, nil, nil)
	ids, _ := tk.Encode("e\u0301") // NFC makes it U+00E9: two UTF-8 bytes
	if want := []int{0xc3, 0xa9}; !slices.Equal(ids, want) {
		t.Errorf("NFC: %v, want %v", ids, want)
	}
}

func TestDecodeReplacesMaximalSubparts(t *testing.T) {
	tk := tiny(t, nil, nil, nil)
	for _, c := range []struct {
		ids  []int
		want string
	}{
		{[]int{0xe4, 0xb8, 'a'}, "\ufffda"},             // truncated 3-byte sequence: one U+FFFD
		{[]int{0xff, 'a'}, "\ufffda"},                   // never valid
		{[]int{0xed, 0xa0, 0x80}, "\ufffd\ufffd\ufffd"}, // a surrogate: each byte
		{[]int{0xf0, 0x9f, 0x98, 0x80}, "😀"},
	} {
		got, err := tk.Decode(c.ids, false)
		if err != nil || got != c.want {
			t.Errorf("Decode(%x) = %q, %v; want %q", c.ids, got, err, c.want)
		}
	}
	if _, err := tk.Decode([]int{99999}, false); err == nil {
		t.Error("an unknown id decoded")
	}
}

func TestUnsupportedComponentsFailAtLoad(t *testing.T) {
	for name, mutate := range map[string]func(map[string]any){
		"unigram":   func(d map[string]any) { d["model"].(map[string]any)["type"] = "Unigram" },
		"metaspace": func(d map[string]any) { d["pre_tokenizer"] = map[string]any{"type": "Metaspace"} },
		"decoder":   func(d map[string]any) { d["decoder"] = map[string]any{"type": "WordPiece"} },
		"dropout":   func(d map[string]any) { d["model"].(map[string]any)["dropout"] = 0.1 },
	} {
		t.Run(name, func(t *testing.T) {
			vocab := map[string]int{}
			for b := 0; b < 256; b++ {
				vocab[string(byteToRune[b])] = b
			}
			doc := map[string]any{
				"pre_tokenizer": map[string]any{"type": "ByteLevel"},
				"decoder":       map[string]any{"type": "ByteLevel"},
				"model":         map[string]any{"type": "BPE", "vocab": vocab, "merges": []any{}},
			}
			mutate(doc)
			data, _ := json.Marshal(doc)
			if _, err := FromJSON(data); !errors.Is(err, ErrUnsupported) {
				t.Errorf("err = %v, want ErrUnsupported", err)
			}
		})
	}
}

func TestConcurrentEncode(t *testing.T) {
	tk := tiny(t, [][2]string{{"a", "b"}, {"ab", "c"}}, nil, nil)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				ids, err := tk.Encode("abc abcabc  ab\n")
				if err != nil || len(ids) == 0 {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
