package tokenizer

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/berth-sh/berth/session/heaptest"
)

// TestEncodeLimitIsEncodeUpToTheLimit: on the fidelity corpus, a limit of
// exactly a text's ids gives Encode's ids, one fewer is ErrTooManyTokens.
func TestEncodeLimitIsEncodeUpToTheLimit(t *testing.T) {
	tk := qwen3(t)
	texts, _ := corpus()
	for _, text := range texts {
		want, err := tk.Encode(text)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tk.EncodeLimit(text, len(want))
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("%q at its own length: %v %v, want %v", text, got, err, want)
		}
		if len(want) == 0 {
			continue
		}
		if _, err := tk.EncodeLimit(text, len(want)-1); !errors.Is(err, ErrTooManyTokens) {
			t.Fatalf("%q one under: %v", text, err)
		}
	}
}

// TestEncodeLimitStopsEarly is the session server's attack from below: a
// 29 MB text far over the limit. Encode (all there was on 5553f78) built
// the list of all 7.6 million pieces and ids before anyone could count
// them: 708 MB allocated and 3 to 6 s for the ASCII text. EncodeLimit
// stops at the limit: the ASCII text costs about the limit's ids, the
// text that starts with a non-ASCII letter (the regex's path) the runes
// of its section and no more.
func TestEncodeLimitStopsEarly(t *testing.T) {
	tk := qwen3(t)
	const n, limit = 29 << 20, 1000
	ascii := strings.Repeat("hello world, this is some text. ", n/32)
	for name, tc := range map[string]struct {
		text  string
		bound uint64
	}{
		"ascii":     {ascii, 1 << 20},
		"non-ascii": {"é" + ascii, 5 * n}, // []rune of the section: 4 bytes a byte
	} {
		var err error
		got := heaptest.Allocated(func() { _, err = tk.EncodeLimit(tc.text, limit) })
		if !errors.Is(err, ErrTooManyTokens) {
			t.Fatalf("%s: %v", name, err)
		}
		if got > tc.bound {
			t.Errorf("%s: %d MB allocated to refuse %d MB, more than %d MB", name, got>>20, n>>20, tc.bound>>20)
		}
		t.Logf("%s: %.1f MB allocated", name, float64(got)/(1<<20))
	}
}

// TestEncodeLimitRefusesAHugePiece: one pre-token of 29 MB (a run of one
// letter) cost 70 s and 1.2 GB of merging in Encode (on 5553f78 more:
// container/heap boxed every candidate, 6.7 GB and 135 s); EncodeLimit
// refuses a piece over MaxPieceBytes before merging it, and a piece whose
// fewest ids would pass the limit before merging too.
func TestEncodeLimitRefusesAHugePiece(t *testing.T) {
	tk := qwen3(t)
	var err error
	huge, long := strings.Repeat("a", 29<<20), strings.Repeat("a", MaxPieceBytes)
	// At most the ids' first allocation (a limit of 1 Mi ids: 8 MB).
	if got := heaptest.Allocated(func() { _, err = tk.EncodeLimit(huge, 1<<20) }); !errors.Is(err, ErrPieceTooLong) || got > 10<<20 {
		t.Errorf("29 MB piece: %v, %d KB allocated", err, got>>10)
	}
	if got := heaptest.Allocated(func() { _, err = tk.EncodeLimit(long, 100) }); !errors.Is(err, ErrTooManyTokens) || got > 64<<10 {
		t.Errorf("a piece over the limit: %v, %d KB allocated", err, got>>10)
	}
	// Under both bounds a long piece is encoded as Encode does.
	long = strings.Repeat("ab", 32<<10)
	want, _ := tk.Encode(long)
	if got, err := tk.EncodeLimit(long, len(want)); err != nil || !slices.Equal(got, want) {
		t.Errorf("a 64 KiB piece: %v, %d ids, want %d", err, len(got), len(want))
	}
}
