package opensandbox

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// read is what a logs answer from cursor carries.
func read(l *logBuf, cursor int64) (string, int64, int64) {
	data, next, dropped := l.from(cursor)
	return string(bytes.Join(data, nil)), next, dropped
}

// TestLogKeepsTail: a command's kept output is its tail within its bound;
// cursors are offsets into the whole output, and an answer from before
// what is kept says how much is gone.
func TestLogKeepsTail(t *testing.T) {
	b := NewLogBudget(0)
	sb := &logPool{max: 1 << 20}
	l := newLogBuf(b, sb, 10)
	l.Write([]byte("hello\n"))
	l.Write([]byte("world\n"))
	for _, c := range []struct {
		cursor        int64
		data          string
		next, dropped int64
	}{
		{0, "llo\nworld\n", 12, 2},
		{2, "llo\nworld\n", 12, 0},
		{6, "world\n", 12, 0},
		{12, "", 12, 0},
		{99, "", 12, 0},
	} {
		data, next, dropped := read(l, c.cursor)
		if data != c.data || next != c.next || dropped != c.dropped {
			t.Errorf("from %d: %q next %d dropped %d, want %q %d %d", c.cursor, data, next, dropped, c.data, c.next, c.dropped)
		}
	}
	// One write past the bound keeps its own tail.
	l.Write([]byte(strings.Repeat("a", 30) + "0123456789"))
	if data, next, dropped := read(l, 12); data != "0123456789" || next != 52 || dropped != 30 {
		t.Fatalf("after a long write: %q %d %d", data, next, dropped)
	}
	if b.Retained() != 10 || sb.used != 10 {
		t.Fatalf("retained %d, sandbox %d; want 10", b.Retained(), sb.used)
	}
}

// TestLogBoundsShared: the sandbox's and the budget's bounds take output
// from the command written to least recently, oldest bytes first, across
// sandboxes for the budget; a released log gives its bytes back and keeps
// nothing more.
func TestLogBoundsShared(t *testing.T) {
	b := NewLogBudget(100)
	sb1, sb2 := &logPool{max: 60}, &logPool{max: 60}
	a, c := newLogBuf(b, sb1, 50), newLogBuf(b, sb1, 50)
	a.Write(bytes.Repeat([]byte("a"), 40))
	c.Write(bytes.Repeat([]byte("c"), 40)) // sb1 holds 80: a, least recent, gives 20
	if a.kept() != 20 || c.kept() != 40 || sb1.used != 60 || b.Retained() != 60 {
		t.Fatalf("sandbox bound: a %d c %d sandbox %d budget %d", a.kept(), c.kept(), sb1.used, b.Retained())
	}
	d := newLogBuf(b, sb2, 50)
	d.Write(bytes.Repeat([]byte("d"), 50)) // the budget at 110: a, least recent of all, gives 10
	if a.kept() != 10 || c.kept() != 40 || sb1.used != 50 || sb2.used != 50 || b.Retained() != 100 {
		t.Fatalf("budget bound: a %d c %d d %d budget %d", a.kept(), c.kept(), d.kept(), b.Retained())
	}
	d.Write(bytes.Repeat([]byte("e"), 30)) // d's own bound: it gives 30 of its own, no one else's
	if a.kept() != 10 || c.kept() != 40 || d.kept() != 50 || sb2.used != 50 || b.Retained() != 100 {
		t.Fatalf("own bound: a %d c %d d %d budget %d", a.kept(), c.kept(), d.kept(), b.Retained())
	}
	if data, _, dropped := read(d, 0); data != strings.Repeat("d", 20)+strings.Repeat("e", 30) || dropped != 30 {
		t.Fatalf("d: %q dropped %d", data, dropped)
	}
	before := b.Retained()
	kept := c.kept()
	c.release()
	c.Write([]byte("more"))
	if b.Retained() != before-kept || sb1.used != a.kept() {
		t.Fatalf("after release: budget %d, want %d", b.Retained(), before-kept)
	}
	if data, next, dropped := read(c, 0); data != "" || next != 44 || dropped != 44 {
		t.Fatalf("a released log answers %q %d %d", data, next, dropped)
	}
}

// TestLogChunksShared: an answer's slices are not changed by later writes
// or drops (they are sent after the lock is released).
func TestLogChunksShared(t *testing.T) {
	l := newLogBuf(NewLogBudget(0), &logPool{max: 1 << 20}, 1000)
	l.Write([]byte("abc"))
	data, _, _ := l.from(0)
	l.Write([]byte(strings.Repeat("x", 2000)))
	if got := string(bytes.Join(data, nil)); got != "abc" {
		t.Fatalf("a snapshot changed to %q", got)
	}
}

// TestLogAnswersBounded: at most maxLogAnswers answers of one budget are
// written at once; one more waits for a turn (here until its context
// ends), and gets one when an answer ends.
func TestLogAnswersBounded(t *testing.T) {
	b := NewLogBudget(0)
	var releases []func()
	for range maxLogAnswers {
		release, err := b.answer(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, release)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := b.answer(ctx); err == nil {
		t.Fatalf("answer %d got a turn", maxLogAnswers+1)
	}
	releases[0]()
	if release, err := b.answer(t.Context()); err != nil {
		t.Fatalf("after one ended: %v", err)
	} else {
		release()
	}
}
