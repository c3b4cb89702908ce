package tokenizer

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/berth-sh/berth/internal/testing/hfref"
)

var (
	qwenOnce sync.Once
	qwenTok  *Tokenizer
	qwenErr  error
)

func qwen3(t testing.TB) *Tokenizer {
	t.Helper()
	dir := hfref.RequireQwen3(t)
	qwenOnce.Do(func() { qwenTok, qwenErr = Load(dir) })
	if qwenErr != nil {
		t.Fatal(qwenErr)
	}
	return qwenTok
}

// TestFidelityCorpus is the "tokenizer fidelity" line: on the
// corpus, every id equals the reference's (transformers.js with Qwen3's
// tokenizer.json), 0 mismatches.
func TestFidelityCorpus(t *testing.T) {
	tk := qwen3(t)
	texts, cats := corpus()
	if len(texts) < 2000 {
		t.Fatalf("corpus has %d strings, want at least 2000", len(texts))
	}
	var want [][]int
	hfref.Run(t, "encode", texts, &want)
	bad := map[string]int{}
	total := map[string]int{}
	for i, s := range texts {
		total[cats[i]]++
		got, err := tk.Encode(s)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want[i]) {
			bad[cats[i]]++
			if bad[cats[i]] <= 3 {
				t.Errorf("%s #%d %q:\n got %v\nwant %v", cats[i], i, clip(s), got, want[i])
			}
		}
	}
	n := 0
	for c, k := range bad {
		n += k
		t.Errorf("category %s: %d of %d strings differ", c, k, total[c])
	}
	t.Logf("%d strings, %d mismatches", len(texts), n)
}

// TestFidelityDecode: decoding the reference's ids, and random id runs
// that cut UTF-8 sequences apart, gives the reference's text.
func TestFidelityDecode(t *testing.T) {
	tk := qwen3(t)
	texts, _ := corpus()
	texts = texts[:600]
	var ids [][]int
	hfref.Run(t, "encode", texts, &ids)
	r := rand.New(rand.NewPCG(7, 7))
	for i := 0; i < 400; i++ {
		run := make([]int, 1+r.IntN(12))
		for j := range run {
			run[j] = r.IntN(151669) // every regular and added token
		}
		ids = append(ids, run)
	}
	var want []string
	hfref.Run(t, "decode", ids, &want)
	for i, seq := range ids {
		got, err := tk.Decode(seq, false)
		if err != nil {
			t.Fatal(err)
		}
		if got != want[i] {
			t.Errorf("decode %v:\n got %q\nwant %q", seq, got, want[i])
		}
		if i < len(texts) && got != texts[i] && !hasFFFD(texts[i]) {
			t.Errorf("round trip of %q gave %q", clip(texts[i]), clip(got))
		}
	}
}

func hasFFFD(s string) bool {
	for _, r := range s {
		if r == 0xfffd {
			return true
		}
	}
	return false
}

func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + fmt.Sprintf("...(%d bytes)", len(s))
	}
	return s
}
