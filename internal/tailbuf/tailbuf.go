// Package tailbuf keeps the end of an output stream whose length the
// writer controls: a RUN step's output for its error, a healthcheck's for
// its. What is kept is bounded whatever is written.
package tailbuf

import "sync"

// Buffer keeps the last Max bytes written to it. It is safe for use from
// several goroutines (a command's stdout and stderr).
type Buffer struct {
	Max int

	mu sync.Mutex
	b  []byte
}

// Write keeps the end of what was written; it never fails.
func (t *Buffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(p) >= t.Max {
		t.b = append(t.b[:0], p[len(p)-t.Max:]...)
		return len(p), nil
	}
	t.b = append(t.b, p...)
	if len(t.b) > 2*t.Max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.Max:]...)
	}
	return len(p), nil
}

// Bytes returns a copy of the last Max bytes written.
func (t *Buffer) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.b
	if len(b) > t.Max {
		b = b[len(b)-t.Max:]
	}
	return append([]byte(nil), b...)
}
