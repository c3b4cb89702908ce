package localagent

import (
	"bufio"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/internal/portproxy"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// The agent's port routes, next to TreePath. Each is an HTTP upgrade to
// UpgradeProto on the agent's socket (which stays on the host), needs the
// access token, and after "101 Switching Protocols" the connection is a
// raw byte pipe:
//
//	GET PortPath?port=N     the pipe is a connection the agent made to
//	                        127.0.0.1:N (else [::1]:N) inside the sandbox
//	GET ListenPath?port=N   the agent listens on 127.0.0.1:N (and [::1]:N
//	                        where it can) inside the sandbox; the pipe
//	                        carries one line per connection accepted
//	                        there, an ID, until the host closes it, which
//	                        closes the listener
//	GET AcceptPath?id=ID    the pipe is the accepted connection ID
//
// So the host reaches a server in the sandbox through PortPath, and a
// process in the sandbox reaches a host address through ListenPath and
// AcceptPath (the host dials the address), all over the socket: the
// sandbox needs no network, and nothing opens in its network namespace
// but what ListenPath asks for. Before the upgrade, failures answer as
// TreePath's do (a status, the class in X-Berth-Error-Class).
const (
	PortPath     = "/berth.agent/port"
	ListenPath   = "/berth.agent/listen"
	AcceptPath   = "/berth.agent/accept"
	UpgradeProto = "berth-tcp"
)

// Bounds of the port routes.
const (
	// maxPortConns bounds the connections the agent carries at once (each
	// holds two sockets and, while copying, splice pipes; the agent has
	// 1,024 fds).
	maxPortConns = 192
	// maxPending bounds the connections accepted for one listener and not
	// yet taken by the host; the listener stops accepting beyond it.
	maxPending = 64
	// pendingTTL is how long an accepted connection waits for the host.
	pendingTTL = 10 * time.Second
	// portDialTimeout bounds a connect inside the sandbox.
	portDialTimeout = 5 * time.Second
)

// portServer serves the port routes.
type portServer struct {
	token string
	slots chan struct{} // one per connection carried

	mu      sync.Mutex
	pending map[string]*pendingConn
}

type pendingConn struct {
	c     net.Conn
	owner *portListener
}

func newPortServer(token string) *portServer {
	return &portServer{token: token, slots: make(chan struct{}, maxPortConns), pending: map[string]*pendingConn{}}
}

func (s *portServer) routes(mux *http.ServeMux) {
	mux.HandleFunc(PortPath, s.auth(s.dial))
	mux.HandleFunc(ListenPath, s.auth(s.listen))
	mux.HandleFunc(AcceptPath, s.auth(s.accept))
}

func (s *portServer) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.token != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get(envd.AccessTokenHeader)), []byte(s.token)) != 1 {
			writeError(w, errdefs.Errorf(errdefs.Unauthenticated, "missing or invalid access token"))
			return
		}
		if r.Method != http.MethodGet || r.Header.Get("Upgrade") != UpgradeProto {
			writeError(w, errdefs.Errorf(errdefs.InvalidArgument, "%s needs GET with Upgrade: %s", r.URL.Path, UpgradeProto))
			return
		}
		h(w, r)
	}
}

// take holds a connection slot; false when all are in use.
func (s *portServer) take() bool {
	select {
	case s.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

func (s *portServer) give() { <-s.slots }

var errBusy = errdefs.Errorf(errdefs.ResourceExhausted, "the sandbox's agent carries %d port connections already", maxPortConns)

func portOf(r *http.Request) (int, error) {
	n, err := strconv.Atoi(r.URL.Query().Get("port"))
	if err != nil || n < 1 || n > 65535 {
		return 0, errdefs.Errorf(errdefs.InvalidArgument, "port %q is not in 1-65535", r.URL.Query().Get("port"))
	}
	return n, nil
}

// upgrade answers 101 and returns the raw connection, with what the
// server had already read from it.
func upgrade(w http.ResponseWriter) (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, nil, err
	}
	_ = c.SetDeadline(time.Time{})
	if _, err := fmt.Fprintf(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: %s\r\nConnection: Upgrade\r\n\r\n", UpgradeProto); err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, rw, nil
}

// buffered returns c, with the bytes rw read ahead of the upgrade (the
// host sends none before it reads the 101, but a client may).
func buffered(c net.Conn, rw *bufio.ReadWriter) net.Conn {
	if n := rw.Reader.Buffered(); n > 0 {
		pre, _ := rw.Reader.Peek(n)
		return &portproxy.Prefixed{Conn: c, Prefix: append([]byte(nil), pre...)}
	}
	return c
}

// dial serves PortPath.
func (s *portServer) dial(w http.ResponseWriter, r *http.Request) {
	port, err := portOf(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if !s.take() {
		writeError(w, errBusy)
		return
	}
	defer s.give()
	up, err := dialLoopback(r, port)
	if err != nil {
		writeError(w, err)
		return
	}
	c, rw, err := upgrade(w)
	if err != nil {
		up.Close()
		return
	}
	_ = portproxy.Join(buffered(c, rw), up)
}

// dialLoopback connects to port on 127.0.0.1, else on ::1 (a server bound
// to IPv6 loopback only).
func dialLoopback(r *http.Request, port int) (net.Conn, error) {
	d := net.Dialer{Timeout: portDialTimeout}
	p := strconv.Itoa(port)
	c, err := d.DialContext(r.Context(), "tcp4", "127.0.0.1:"+p)
	if err == nil {
		return c, nil
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		if c6, err6 := d.DialContext(r.Context(), "tcp6", "[::1]:"+p); err6 == nil {
			return c6, nil
		}
		return nil, errdefs.Errorf(errdefs.Unavailable, "nothing listens on port %d in the sandbox (connection refused)", port)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return nil, errdefs.Errorf(errdefs.DeadlineExceeded, "port %d in the sandbox did not answer within %v", port, portDialTimeout)
	}
	return nil, errdefs.Errorf(errdefs.Unavailable, "connect to port %d in the sandbox: %v", port, err)
}

// listen serves ListenPath: the listener lives as long as the pipe.
func (s *portServer) listen(w http.ResponseWriter, r *http.Request) {
	port, err := portOf(r)
	if err != nil {
		writeError(w, err)
		return
	}
	l, err := listenLoopback(port)
	if err != nil {
		writeError(w, err)
		return
	}
	c, _, err := upgrade(w)
	if err != nil {
		l.close()
		return
	}
	l.ctl = c
	l.serve(s)
}

// accept serves AcceptPath.
func (s *portServer) accept(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	s.mu.Lock()
	p := s.pending[id]
	delete(s.pending, id)
	s.mu.Unlock()
	if p == nil {
		writeError(w, errdefs.Errorf(errdefs.NotFound, "no connection %q is waiting", id))
		return
	}
	p.owner.done()
	c, rw, err := upgrade(w)
	if err != nil {
		p.c.Close()
		s.give()
		return
	}
	defer s.give()
	_ = portproxy.Join(buffered(c, rw), p.c)
}

// portListener is one ListenPath's listeners and its pipe to the host.
type portListener struct {
	port int
	lns  []net.Listener
	ctl  net.Conn

	waiting chan struct{} // a slot per pending connection
	lines   chan string   // IDs to tell the host
}

func listenLoopback(port int) (*portListener, error) {
	p := strconv.Itoa(port)
	ln, err := net.Listen("tcp4", "127.0.0.1:"+p)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, errdefs.Errorf(errdefs.AlreadyExists, "port %d is already in use in the sandbox", port)
		}
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "listen on port %d in the sandbox: %v", port, err)
	}
	l := &portListener{port: port, lns: []net.Listener{ln}, waiting: make(chan struct{}, maxPending), lines: make(chan string, maxPending)}
	// IPv6 loopback too, where the sandbox has it, for clients that
	// resolve localhost to ::1 first.
	if ln6, err := net.Listen("tcp6", "[::1]:"+p); err == nil {
		l.lns = append(l.lns, ln6)
	}
	return l, nil
}

func (l *portListener) close() {
	for _, ln := range l.lns {
		ln.Close()
	}
}

// done frees the pending slot of a connection the host took.
func (l *portListener) done() { <-l.waiting }

// serve accepts until the host closes the pipe, then closes the
// listeners and the connections the host never took.
func (l *portListener) serve(s *portServer) {
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for _, ln := range l.lns {
		wg.Go(func() { l.acceptLoop(s, ln, stop) })
	}
	wg.Go(func() {
		// The host writes nothing: a read returns when it closes.
		var b [1]byte
		_, _ = l.ctl.Read(b[:])
		close(stop)
		l.close()
	})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case id := <-l.lines:
				_ = l.ctl.SetWriteDeadline(time.Now().Add(pendingTTL))
				if _, err := l.ctl.Write([]byte(id + "\n")); err != nil {
					l.ctl.Close()
				}
			}
		}
	})
	wg.Wait()
	l.ctl.Close()
	s.mu.Lock()
	for id, p := range s.pending {
		if p.owner == l {
			p.c.Close()
			delete(s.pending, id)
			s.give()
		}
	}
	s.mu.Unlock()
}

func (l *portListener) acceptLoop(s *portServer, ln net.Listener, stop <-chan struct{}) {
	for {
		// Wait for room before accepting: beyond maxPending, connections
		// wait in the kernel's backlog instead of in the agent.
		select {
		case l.waiting <- struct{}{}:
		case <-stop:
			return
		}
		c, err := ln.Accept()
		if err != nil {
			<-l.waiting
			select {
			case <-stop:
				return
			default:
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if !s.take() {
			<-l.waiting
			c.Close()
			continue
		}
		id := newConnID()
		s.mu.Lock()
		s.pending[id] = &pendingConn{c: c, owner: l}
		s.mu.Unlock()
		time.AfterFunc(pendingTTL, func() { s.expire(id) })
		l.lines <- id
	}
}

// expire drops a connection the host did not take in time.
func (s *portServer) expire(id string) {
	s.mu.Lock()
	p := s.pending[id]
	delete(s.pending, id)
	s.mu.Unlock()
	if p != nil {
		p.c.Close()
		p.owner.done()
		s.give()
	}
}

func newConnID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
