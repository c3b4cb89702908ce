package tbench2

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// capped keeps a command's output within max bytes: its head and its tail,
// with what was left out counted between them. A command's output is the
// sandbox's to make as large as it likes; an answer must stay a frame. It
// is safe for the two writers of stdout and stderr.
type capped struct {
	mu      sync.Mutex
	max     int
	head    []byte
	tail    []byte // a ring once full
	pos     int    // next write in tail, once full
	omitted int64
}

func newCapped(max int) *capped { return &capped{max: max} }

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	half := c.max / 2
	if room := half - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	tailMax := c.max - half
	for len(p) > 0 {
		if len(c.tail) < tailMax {
			k := min(tailMax-len(c.tail), len(p))
			c.tail = append(c.tail, p[:k]...)
			p = p[k:]
			continue
		}
		// Full: overwrite the oldest tail bytes.
		k := min(tailMax-c.pos, len(p))
		copy(c.tail[c.pos:], p[:k])
		c.pos = (c.pos + k) % tailMax
		c.omitted += int64(k)
		p = p[k:]
	}
	return n, nil
}

// String is the kept output: head, a marker when bytes were left out, tail.
func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	b.Write(c.head)
	if c.omitted > 0 {
		fmt.Fprintf(&b, "\n[... %d bytes of output omitted ...]\n", c.omitted)
	}
	b.Write(c.tail[c.pos:])
	b.Write(c.tail[:c.pos])
	return validUTF8(b.String())
}

// validUTF8 replaces bytes that are not UTF-8 (a cut through a character,
// binary output): a JSON string cannot carry them.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// stream is a background session's output not yet returned: it keeps the
// newest max bytes and counts what it dropped.
type stream struct {
	mu      sync.Mutex
	max     int
	buf     []byte
	dropped int64
}

func (s *stream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(s.buf, p...)
	if over := len(s.buf) - s.max; over > 0 {
		s.dropped += int64(over)
		s.buf = append(s.buf[:0], s.buf[over:]...)
	}
	return len(p), nil
}

// take returns the unread output and forgets it.
func (s *stream) take() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := string(s.buf)
	if s.dropped > 0 {
		out = fmt.Sprintf("[... %d earlier bytes of output dropped ...]\n", s.dropped) + out
		s.dropped = 0
	}
	s.buf = s.buf[:0]
	return validUTF8(out)
}
