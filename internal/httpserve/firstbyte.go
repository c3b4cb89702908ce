package httpserve

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Listener wraps ln so that a new connection reaches the server only once
// its client has sent a byte. Until then the connection waits as long as
// a kept-alive one may (IdleTimeout), not ReadHeaderTimeout.
//
// Why: net/http starts ReadHeaderTimeout when it accepts, but a client
// that dials more connections than it ends up using (Go's transport
// does, under concurrent calls) parks the spare ones in its idle pool for
// up to 90 s. The server hung up on them after 10 s, and the client's next
// call on such a connection failed with a broken pipe: Go retries only on
// connections that had served a call before. A fork bomb slowed the
// local agent enough for one of 1000 file calls to hit this.
func Listener(ln net.Listener) net.Listener { return listen(ln, IdleTimeout, MaxWaiting) }

// MaxWaiting bounds the connections a Listener holds waiting for their
// first byte. Past it a new connection goes to the server at once, with
// the header timeout as before Listener: a client that opens connections
// and sends nothing holds at most this many for IdleTimeout.
const MaxWaiting = 1024

func listen(ln net.Listener, idle time.Duration, maxWaiting int) net.Listener {
	l := &firstByteListener{
		Listener: ln, idle: idle, maxWaiting: maxWaiting,
		ready: make(chan accepted), done: make(chan struct{}),
		pending: map[net.Conn]struct{}{},
	}
	go l.acceptLoop()
	return l
}

type accepted struct {
	c   net.Conn
	err error
}

type firstByteListener struct {
	net.Listener
	idle       time.Duration
	maxWaiting int
	ready      chan accepted
	done       chan struct{}
	once       sync.Once

	mu      sync.Mutex
	pending map[net.Conn]struct{} // waiting for their first byte
}

func (l *firstByteListener) Accept() (net.Conn, error) {
	select {
	case a := <-l.ready:
		return a.c, a.err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close closes the listener and every connection still waiting.
func (l *firstByteListener) Close() error {
	err := net.ErrClosed
	l.once.Do(func() {
		close(l.done)
		err = l.Listener.Close()
		l.mu.Lock()
		for c := range l.pending {
			c.Close()
		}
		l.mu.Unlock()
	})
	return err
}

// acceptLoop hands an accept error to the server's Accept and waits for it
// to be taken, so that the server's back-off on temporary errors (too many
// open files) paces this loop too.
func (l *firstByteListener) acceptLoop() {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			select {
			case l.ready <- accepted{err: err}:
			case <-l.done:
				return
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		switch l.track(c) {
		case closed:
			return
		case full:
			l.handOn(c)
		case tracked:
			go l.wait(c)
		}
	}
}

type trackResult int

const (
	tracked trackResult = iota
	full                // MaxWaiting are waiting: c is not tracked
	closed              // the listener is closed, and c with it
)

// track records c as waiting, unless the listener is closed or full.
func (l *firstByteListener) track(c net.Conn) trackResult {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.done:
		c.Close()
		return closed
	default:
	}
	if len(l.pending) >= l.maxWaiting {
		return full
	}
	l.pending[c] = struct{}{}
	return tracked
}

// handOn gives c to the server's Accept, or closes it once the listener is
// closed.
func (l *firstByteListener) handOn(c net.Conn) {
	select {
	case l.ready <- accepted{c: c}:
	case <-l.done:
		c.Close()
	}
}

func (l *firstByteListener) wait(c net.Conn) {
	ok := awaitFirstByte(c, l.idle)
	l.mu.Lock()
	delete(l.pending, c)
	l.mu.Unlock()
	if !ok {
		c.Close()
		return
	}
	l.handOn(c)
}

// awaitFirstByte waits until c has a byte to read (peeked, not consumed),
// for at most idle. False when the client closed or sent nothing in time.
// A connection without a file descriptor (TLS) is passed on at once.
func awaitFirstByte(c net.Conn, idle time.Duration) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	if err := c.SetReadDeadline(time.Now().Add(idle)); err != nil {
		return false
	}
	var buf [1]byte
	var n int
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		n, _, rerr = unix.Recvfrom(int(fd), buf[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		return rerr != unix.EAGAIN && rerr != unix.EINTR
	})
	if err != nil || rerr != nil || n == 0 {
		return false
	}
	return c.SetReadDeadline(time.Time{}) == nil
}
