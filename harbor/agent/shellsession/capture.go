package shellsession

import (
	"bytes"
	"fmt"
	"strconv"
	"sync"
)

// capture collects a pipe shell's output: it takes the markers out of the
// stream (recording the highest sequence number and its value), and keeps
// at most keep bytes of the head and keep of the tail of what is left
// until take is called. It is an io.Writer safe for concurrent use (the
// driver writes stdout and stderr from two goroutines).
type capture struct {
	prefix []byte // "\x1eB<nonce> "
	keep   int

	mu      sync.Mutex
	carry   []byte // a possible marker start held back from the last write
	head    []byte
	tail    []byte
	omitted int64
	seen    int
	value   int
	changed chan struct{} // closed and replaced at every marker
}

func newCapture(nonce string, keep int) *capture {
	return &capture{prefix: []byte("\x1eB" + nonce + " "), keep: keep, seen: -1, changed: make(chan struct{})}
}

// Write implements io.Writer.
func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	data := append(c.carry, p...)
	c.carry = nil
	for {
		i := bytes.Index(data, c.prefix)
		if i < 0 {
			break
		}
		end := bytes.IndexByte(data[i+len(c.prefix):], 0x1e)
		if end < 0 {
			c.store(data[:i])
			c.carry = append([]byte(nil), data[i:]...)
			if len(c.carry) > 256 { // not a marker after all
				c.store(c.carry)
				c.carry = nil
			}
			return len(p), nil
		}
		body := data[i+len(c.prefix) : i+len(c.prefix)+end]
		rest := data[i+len(c.prefix)+end+1:]
		if len(rest) > 0 && rest[0] == '\n' {
			rest = rest[1:]
		}
		c.store(data[:i])
		c.marker(string(body))
		data = rest
	}
	// Hold back a tail that could be the start of a marker cut by the write.
	if j := bytes.LastIndexByte(data, 0x1e); j >= 0 && bytes.HasPrefix(c.prefix, data[j:min(len(data), j+len(c.prefix))]) {
		c.store(data[:j])
		c.carry = append([]byte(nil), data[j:]...)
		return len(p), nil
	}
	c.store(data)
	return len(p), nil
}

// marker records "<seq> <value>".
func (c *capture) marker(body string) {
	var seq, val int
	if _, err := fmt.Sscan(body, &seq, &val); err != nil {
		return
	}
	if seq > c.seen {
		c.seen, c.value = seq, val
	}
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *capture) store(b []byte) {
	if len(b) == 0 {
		return
	}
	if room := c.keep - len(c.head); room > 0 {
		n := min(room, len(b))
		c.head = append(c.head, b[:n]...)
		b = b[n:]
	}
	c.tail = append(c.tail, b...)
	if over := len(c.tail) - c.keep; over > c.keep {
		c.omitted += int64(over)
		c.tail = append(c.tail[:0], c.tail[over:]...)
	}
}

// state returns the highest marker seen, its value and a channel closed
// at the next marker.
func (c *capture) state() (seen, value int, changed <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen, c.value, c.changed
}

// take returns the output collected since the last take.
func (c *capture) take() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	tail := c.tail
	omitted := c.omitted
	if over := len(tail) - c.keep; over > 0 {
		omitted += int64(over)
		tail = tail[over:]
	}
	var out string
	if omitted > 0 {
		out = string(c.head) + "\n[... " + strconv.FormatInt(omitted, 10) + " bytes of output omitted ...]\n" + string(tail)
	} else {
		out = string(c.head) + string(tail)
	}
	c.head, c.tail, c.omitted = nil, nil, 0
	return out
}
