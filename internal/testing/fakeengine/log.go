package fakeengine

import (
	"context"
	"sync"
)

// Log keeps everything written to it, so that readers may start at any
// offset and follow what comes, until it is closed: a command's output
// streams for wires that resume a read where it broke off (Modal's stdio
// reads, Daytona's session logs). Writes after Close are still kept.
type Log struct {
	mu      sync.Mutex
	data    []byte
	closed  bool
	changed chan struct{} // closed and replaced on every write and on Close
}

// NewLog returns an empty, open log.
func NewLog() *Log { return &Log{changed: make(chan struct{})} }

func (l *Log) notify() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// Write appends b.
func (l *Log) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.data = append(l.data, b...)
	l.notify()
	return len(b), nil
}

// Close ends the log: readers at its end see eof.
func (l *Log) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		l.notify()
	}
}

// Since returns what was written after the first off bytes, whether the
// log is closed, and a channel closed on its next change.
func (l *Log) Since(off int) ([]byte, bool, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.data[min(off, len(l.data)):], l.closed, l.changed
}

// Read returns up to max bytes from off, waiting for some while the log is
// open; eof once it is closed and off is at its end.
func (l *Log) Read(ctx context.Context, off, max int) (b []byte, eof bool, err error) {
	for {
		data, closed, changed := l.Since(off)
		switch {
		case len(data) > 0:
			return data[:min(len(data), max)], false, nil
		case closed:
			return nil, true, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
}
