package hud

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// ErrFrameTooLarge is a frame longer than the limit without its newline.
var ErrFrameTooLarge = errors.New("hud: frame too large")

// errIdle is a read that timed out before a frame began.
var errIdle = errors.New("hud: no frame within the idle limit")

// framer reads and writes newline-delimited JSON frames on one connection,
// bounded in size and time.
type framer struct {
	c   net.Conn
	r   *bufio.Reader
	max int

	wmu          sync.Mutex
	writeTimeout time.Duration
}

func newFramer(c net.Conn, maxFrame int, writeTimeout time.Duration) *framer {
	return &framer{c: c, r: bufio.NewReaderSize(c, 64<<10), max: maxFrame, writeTimeout: writeTimeout}
}

// read returns the next non-blank line without its newline. It waits up to
// idle for the frame's first byte (0: no limit), then up to whole for the
// rest of it, so a peer that trickles bytes or never ends its line is cut
// off at the limit instead of being held forever.
func (f *framer) read(idle, whole time.Duration) ([]byte, error) {
	for {
		if err := f.c.SetReadDeadline(deadline(idle)); err != nil {
			return nil, err
		}
		if _, err := f.r.Peek(1); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return nil, fmt.Errorf("%w: %w", errIdle, err)
			}
			return nil, err
		}
		if err := f.c.SetReadDeadline(deadline(whole)); err != nil {
			return nil, err
		}
		var line []byte
		for {
			chunk, err := f.r.ReadSlice('\n')
			if len(line)+len(chunk) > f.max+1 { // +1: the newline
				return nil, fmt.Errorf("%w: more than %d bytes", ErrFrameTooLarge, f.max)
			}
			line = append(line, chunk...)
			if err == nil {
				break
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if errors.Is(err, io.EOF) && len(line) > 0 {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			return line, nil
		}
	}
}

func deadline(d time.Duration) time.Time {
	if d <= 0 {
		return time.Time{}
	}
	return time.Now().Add(d)
}

// write sends v as one compact JSON line, as HUD's send_frame does.
func (f *framer) write(v any) error {
	// Python's json.dumps escapes no HTML characters; neither do we.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // one line, newline-terminated
		return err
	}
	b := buf.Bytes()
	f.wmu.Lock()
	defer f.wmu.Unlock()
	if err := f.c.SetWriteDeadline(deadline(f.writeTimeout)); err != nil {
		return err
	}
	_, err := f.c.Write(b)
	return err
}

// rest is the connection with what the framer has read ahead put back in
// front, for a tunnel whose raw bytes begin right after its first frame.
func (f *framer) rest() net.Conn {
	_ = f.c.SetDeadline(time.Time{})
	if f.r.Buffered() == 0 {
		return f.c
	}
	ahead, _ := f.r.Peek(f.r.Buffered())
	return &prefixConn{Conn: f.c, r: io.MultiReader(bytes.NewReader(bytes.Clone(ahead)), f.c)}
}

type prefixConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// CloseWrite half-closes when the underlying connection can.
func (c *prefixConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}
