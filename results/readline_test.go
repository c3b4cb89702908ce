package results

import (
	"bufio"
	"strings"
	"testing"
)

// A line past the limit is skipped whole and reported, and the next line
// still reads.
func TestReadLineLimit(t *testing.T) {
	br := bufio.NewReaderSize(strings.NewReader(strings.Repeat("x", 100)+"\n{}\n"), 16)
	b, long, err := readLine(br, 10)
	if !long || b != nil || err != nil {
		t.Fatalf("long line: %q %v %v", b, long, err)
	}
	b, long, err = readLine(br, 10)
	if long || string(b) != "{}\n" || err != nil {
		t.Fatalf("next line: %q %v %v", b, long, err)
	}
}
