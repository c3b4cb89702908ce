package tailbuf_test

import (
	"bytes"
	"testing"

	"github.com/berth-sh/berth/internal/tailbuf"
)

// Whatever is written, in whatever pieces, the buffer holds the last Max
// bytes of it and never more than twice that.
func TestKeepsTheEnd(t *testing.T) {
	var all bytes.Buffer
	b := &tailbuf.Buffer{Max: 10}
	for i, piece := range []string{"abc", "defghijklmnop", "q", "", "rstuvwxyz0123456789ABCDEFGHIJ", "k"} {
		b.Write([]byte(piece))
		all.WriteString(piece)
		want := all.Bytes()
		if len(want) > 10 {
			want = want[len(want)-10:]
		}
		if got := b.Bytes(); !bytes.Equal(got, want) {
			t.Errorf("after write %d: %q, want %q", i, got, want)
		}
	}
}
