package portproxy

import (
	"errors"
	"io"
	"net"
	"sync"
)

// Prefixed is a connection some of whose first bytes were already read
// (past an HTTP upgrade's answer, by a buffered reader): Join sends
// Prefix on before the rest, and splices the Conn underneath.
type Prefixed struct {
	net.Conn
	Prefix []byte
}

// Read returns the prefix first. (Join does not use it: it would hide the
// Conn's type from splice.)
func (p *Prefixed) Read(b []byte) (int, error) {
	if len(p.Prefix) > 0 {
		n := copy(b, p.Prefix)
		p.Prefix = p.Prefix[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}

// CloseWrite half-closes the Conn underneath where it can.
func (p *Prefixed) CloseWrite() error { return closeWrite(p.Conn) }

// unwrap returns the connection to splice and the bytes to send first.
func unwrap(c net.Conn) (net.Conn, []byte) {
	if p, ok := c.(*Prefixed); ok {
		pre := p.Prefix
		p.Prefix = nil
		return p.Conn, pre
	}
	return c, nil
}

// Join copies a to b and b to a until both directions have ended, passing
// on a half-close (the end of one direction) as a half-close of the
// other side where the connection has one, then closes both. It returns
// the first error that was not a normal end.
func Join(a, b net.Conn) error {
	ra, preA := unwrap(a)
	rb, preB := unwrap(b)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); errs[0] = half(rb, ra, preA) }()
	go func() { defer wg.Done(); errs[1] = half(ra, rb, preB) }()
	wg.Wait()
	ra.Close()
	rb.Close()
	for _, err := range errs {
		if err != nil && !ignorable(err) {
			return err
		}
	}
	return nil
}

// half copies src (after pre) to dst, then half-closes dst, or closes
// both when dst cannot be half-closed or the copy failed (so that the
// other direction ends too, instead of waiting forever).
func half(dst, src net.Conn, pre []byte) error {
	var err error
	if len(pre) > 0 {
		_, err = dst.Write(pre)
	}
	if err == nil {
		// Concrete *net.TCPConn and *net.UnixConn on both sides: io.Copy
		// finds TCPConn's ReadFrom and WriteTo, which splice.
		_, err = io.Copy(dst, src)
	}
	if err != nil || closeWrite(dst) != nil {
		dst.Close()
		src.Close()
	}
	return err
}

func closeWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// ignorable: the ends of a connection the other side or Join closed.
func ignorable(err error) bool {
	return errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) || isReset(err)
}
