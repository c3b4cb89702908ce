package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestFastSplitEqualsRegex proves the hand-written splitter equal to the
// regex it replaces (regexp2, JavaScript semantics) on ASCII: random
// strings over an alphabet of the pattern's edge cases (with non-ASCII
// letters, spaces and symbols among them), and the fidelity corpus, for
// both recognized patterns.
func TestFastSplitEqualsRegex(t *testing.T) {
	alphabet := []string{"λ", "\u00a0", "é", "中", "\u2028", "😀", "\ufeff", "\u0085", " ", " ", "  ", "\t", "\n", "\r", "\r\n", "\v", "\f", "'", "'", "s", "S", "t", "T", "r", "R", "e", "E",
		"v", "V", "m", "M", "l", "L", "d", "D", "x", "Q", "0", "1", "9", "(", ")", ".", ",", "-", "!", "\"", "_", "\x00", "\x7f", "#"}
	r := rand.New(rand.NewPCG(1, 2))
	var inputs []string
	for i := 0; i < 30000; i++ {
		var b strings.Builder
		for j := 0; j < r.IntN(24); j++ {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		inputs = append(inputs, b.String())
	}
	texts, _ := corpus()
	inputs = append(inputs, texts...)
	for _, pattern := range []string{qwenPattern, llama3Pattern} {
		sp, err := compileSplit(pattern)
		if err != nil || sp.fast == nil {
			t.Fatalf("%v, fast %v", err, sp.fast)
		}
		for _, s := range inputs {
			want, err := collect(func(y func(string) error) error { return sp.regex(s, false, y) })
			if err != nil {
				t.Fatal(err)
			}
			got, err := collect(func(y func(string) error) error { return sp.each(s, false, y) })
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("%q:\n fast  %q\n regex %q (%v)", s, got, want, err)
			}
		}
	}
	if recognize(`\s+|\S+`) != nil {
		t.Error("an unknown pattern took the fast path")
	}
}

// collect gathers what a splitter yields.
func collect(split func(yield func(string) error) error) ([]string, error) {
	var out []string
	err := split(func(p string) error { out = append(out, p); return nil })
	return out, err
}
