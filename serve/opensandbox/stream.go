package opensandbox

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// maxLineBytes bounds one output event: a line longer than this goes out
// in pieces, so that output without newlines cannot grow a buffer.
const maxLineBytes = 64 << 10

// pingEvery is how often a long command's stream carries a ping event, as
// upstream's execd sends them (proxies keep the stream open).
const pingEvery = 3 * time.Second

// eventWriter writes the command stream: each event one JSON object and a
// blank line, flushed at once. Writes come from the output goroutines and
// the pinger; a failed write (client gone) makes the rest no-ops.
type eventWriter struct {
	mu     sync.Mutex
	w      http.ResponseWriter
	rc     *http.ResponseController
	failed bool
}

func newEventWriter(w http.ResponseWriter) *eventWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	ew := &eventWriter{w: w, rc: http.NewResponseController(w)}
	_ = ew.rc.Flush()
	return ew
}

func (ew *eventWriter) send(ev StreamEvent) {
	if ev.Timestamp == 0 {
		ev.Timestamp = time.Now().UnixMilli()
	}
	b, _ := json.Marshal(ev)
	b = append(b, '\n', '\n')
	ew.mu.Lock()
	defer ew.mu.Unlock()
	if ew.failed {
		return
	}
	if _, err := ew.w.Write(b); err != nil {
		ew.failed = true
		return
	}
	if err := ew.rc.Flush(); err != nil {
		ew.failed = true
	}
}

// pinger sends ping events until stop is closed.
func (ew *eventWriter) pinger(stop <-chan struct{}) {
	t := time.NewTicker(pingEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			ew.send(StreamEvent{Type: EventPing, Text: "pong"})
		}
	}
}

// lineEvents turns one output stream into events of one line each, without
// the line's terminator ("\n", "\r" or "\r\n"); an empty line is sent as
// "\n", and the last, unterminated line when the stream ends. That is how
// upstream's execd splits output; clients join the texts with newlines.
type lineEvents struct {
	mu  sync.Mutex // a provider may still write when Wait gave up
	typ string
	ew  *eventWriter
	buf []byte
	cr  bool // the last byte seen was '\r'
}

func (l *lineEvents) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range p {
		switch {
		case b == '\n' && l.cr:
			l.cr = false // the second half of "\r\n"
		case b == '\n' || b == '\r':
			l.emit()
			l.cr = b == '\r'
		default:
			l.cr = false
			l.buf = append(l.buf, b)
			if len(l.buf) >= maxLineBytes {
				l.emit()
			}
		}
	}
	return len(p), nil
}

func (l *lineEvents) emit() {
	text := string(l.buf)
	if text == "" {
		text = "\n"
	}
	l.buf = l.buf[:0]
	l.ew.send(StreamEvent{Type: l.typ, Text: text})
}

// flush sends the unterminated last line, if any.
func (l *lineEvents) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.emit()
	}
}
