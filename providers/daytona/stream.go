package daytona

import (
	"bytes"
	"encoding/base64"
	"io"
)

// A session log is the bytes of stdout and stderr lines, each line opened
// by a marker: 01 01 01 for stdout, 02 02 02 for stderr. The wrapper makes
// every line base64 (or a '!' message), so data bytes are never 01 or 02.
const (
	markOut = 1
	markErr = 2
)

// demux reads a raw session log, in order and in pieces of any size, and
// delivers the decoded bytes to the stdout and stderr writers.
type demux struct {
	out, err *lineDecoder
	cur      *lineDecoder // stream of the current line; nil before any marker
	pend     []byte       // trailing bytes that may begin a marker
	n        int64        // raw bytes consumed, the offset to resume from
}

func newDemux(stdout, stderr io.Writer) *demux {
	return &demux{out: &lineDecoder{w: stdout}, err: &lineDecoder{w: stderr}}
}

func (d *demux) feed(p []byte) {
	d.n += int64(len(p))
	data := p
	if len(d.pend) > 0 {
		data = append(d.pend, p...)
		d.pend = nil
	}
	for i := 0; i < len(data); {
		b := data[i]
		if b == markOut || b == markErr {
			switch {
			case i+3 <= len(data) && data[i+1] == b && data[i+2] == b:
				d.cur = d.out
				if b == markErr {
					d.cur = d.err
				}
				i += 3
				continue
			case i+3 > len(data) && bytes.Count(data[i:], []byte{b}) == len(data)-i:
				d.pend = append([]byte(nil), data[i:]...) // a marker cut in two
				return
			}
		}
		j := i + 1
		for j < len(data) && data[j] != markOut && data[j] != markErr {
			j++
		}
		if d.cur != nil {
			d.cur.write(data[i:j])
		}
		i = j
	}
}

// flush delivers what is left at the end of the log.
func (d *demux) flush() {
	if d.cur != nil && len(d.pend) > 0 {
		d.cur.write(d.pend)
	}
	d.pend = nil
	d.out.flush()
	d.err.flush()
}

// writeErr is the first error a writer returned.
func (d *demux) writeErr() error {
	if d.out.werr != nil {
		return d.out.werr
	}
	return d.err.werr
}

// maxLine bounds a line held while waiting for its newline; the wrapper's
// lines are 76 characters.
const maxLine = 1 << 20

// lineDecoder turns the lines of one stream back into the program's bytes.
type lineDecoder struct {
	w    io.Writer
	line []byte
	werr error
}

func (l *lineDecoder) write(p []byte) {
	for len(p) > 0 {
		k := bytes.IndexByte(p, '\n')
		if k < 0 {
			l.line = append(l.line, p...)
			if len(l.line) > maxLine {
				l.flush()
			}
			return
		}
		l.line = append(l.line, p[:k]...)
		l.emit(l.line)
		l.line = l.line[:0]
		p = p[k+1:]
	}
}

func (l *lineDecoder) flush() {
	if len(l.line) > 0 {
		l.emit(l.line)
		l.line = l.line[:0]
	}
}

func (l *lineDecoder) emit(line []byte) {
	if len(line) == 0 {
		return
	}
	if line[0] == '!' { // the wrapper's own message
		l.deliver(append(append([]byte(nil), line[1:]...), '\n'))
		return
	}
	buf := make([]byte, base64.StdEncoding.DecodedLen(len(line)))
	n, err := base64.StdEncoding.Decode(buf, line)
	if err != nil { // not ours: pass the text on rather than lose it
		l.deliver(append(append([]byte(nil), line...), '\n'))
		return
	}
	l.deliver(buf[:n])
}

func (l *lineDecoder) deliver(b []byte) {
	if l.w == nil || l.werr != nil || len(b) == 0 {
		return
	}
	_, l.werr = l.w.Write(b)
}
