package portproxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// DialFunc connects to the port behind a Listener.
type DialFunc func(ctx context.Context) (net.Conn, error)

// Timeouts of a Listener's connections before they are joined.
const (
	dialTimeout = 30 * time.Second
	// refuseWait bounds how long a refused HTTP client may take to send
	// its request before the 502 goes out anyway.
	refuseWait = 2 * time.Second
)

// Listener accepts connections on a loopback address and joins each to a
// connection from its DialFunc.
type Listener struct {
	ln    net.Listener
	dial  DialFunc
	proto driver.PortProtocol
	ctx   context.Context
	stop  context.CancelFunc

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// Listen opens a listener on 127.0.0.1 (an ephemeral port: nothing but
// this host's own processes can connect) and serves it until Close.
// When dial fails, an HTTP client (proto PortHTTP) gets a 502 answer whose
// body is the error, and a TCP client a reset.
func Listen(dial DialFunc, proto driver.PortProtocol) (*Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, errdefs.Errorf(errdefs.Unavailable, "listen on the loopback interface: %w", err)
	}
	return Serve(ln, dial, proto), nil
}

// Serve is Listen on a listener of the caller's (a TLS one, whose
// connections Join carries decrypted), which Close closes.
func Serve(ln net.Listener, dial DialFunc, proto driver.PortProtocol) *Listener {
	ctx, stop := context.WithCancel(context.Background())
	l := &Listener{ln: ln, dial: dial, proto: proto, ctx: ctx, stop: stop, conns: map[net.Conn]struct{}{}}
	l.wg.Add(1)
	go l.serve()
	return l
}

// Addr is host:port of the listener.
func (l *Listener) Addr() string { return l.ln.Addr().String() }

// Close stops accepting, ends every connection and waits for them.
func (l *Listener) Close() error {
	l.stop()
	err := l.ln.Close()
	l.mu.Lock()
	for c := range l.conns {
		c.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
	return err
}

func (l *Listener) serve() {
	defer l.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			if l.ctx.Err() != nil {
				return
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			// EMFILE and the like: wait instead of spinning.
			select {
			case <-l.ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		if !l.track(c, true) {
			c.Close()
			return
		}
		l.wg.Add(1)
		go l.handle(c)
	}
}

// track adds or removes c; false when the listener is closing.
func (l *Listener) track(c net.Conn, add bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !add {
		delete(l.conns, c)
		return true
	}
	if l.ctx.Err() != nil {
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *Listener) handle(c net.Conn) {
	defer l.wg.Done()
	defer l.track(c, false)
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	ctx, cancel := context.WithTimeout(l.ctx, dialTimeout)
	up, err := l.dial(ctx)
	cancel()
	if err != nil {
		l.refuse(c, err)
		return
	}
	if !l.track(up, true) {
		up.Close()
		c.Close()
		return
	}
	defer l.track(up, false)
	_ = Join(c, up)
}

// refuse answers a connection whose port could not be reached.
func (l *Listener) refuse(c net.Conn, err error) {
	defer c.Close()
	if l.proto != driver.PortHTTP {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset, not a clean end that reads as an empty answer
		}
		return
	}
	// Read the request's head first: closing with unread bytes would
	// reset the connection and lose the answer.
	_ = c.SetDeadline(time.Now().Add(refuseWait))
	if req, rerr := http.ReadRequest(bufio.NewReader(c)); rerr == nil && req.Body != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(req.Body, 1<<20))
	}
	WriteBadGateway(c, err)
}

// WriteBadGateway writes an HTTP/1.1 502 answer carrying err's text and
// its class, and asks the client to close.
func WriteBadGateway(w io.Writer, err error) {
	msg := oneLine(err.Error()) + "\n"
	fmt.Fprintf(w, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\nX-Berth-Error-Class: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		errdefs.ClassOf(err), len(msg), msg)
}

func oneLine(s string) string {
	if len(s) > 2048 {
		s = s[:2048]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
}
