package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// Writers and readers at once (run with -race): every write lands, and
// Bytes is a copy that later writes do not change.
func TestConcurrentWriteAndRead(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				b.Write([]byte("x"))
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("x", 400) {
		t.Fatalf("len %d, want 400", len(got))
	}
	snap := b.Bytes()
	b.Write([]byte("y"))
	if string(snap) != strings.Repeat("x", 400) {
		t.Fatal("Bytes changed after a later write")
	}
	var empty Buffer
	if empty.Bytes() != nil {
		t.Fatal("Bytes of an empty buffer is not nil")
	}
}
