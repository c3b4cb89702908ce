package hud

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Env is what a Server serves: its tasks, what one control session does,
// and where capability tunnels go. Methods are called concurrently.
type Env interface {
	Info() EnvInfo
	ListTasks(ctx context.Context) ([]TaskEntry, error)
	// NewSession makes the state of a new control session with this id.
	NewSession(ctx context.Context, id string) (Session, error)
	// Tunnel finds what serves a tunnel to the named capability. An error
	// refuses the tunnel (an *Error chooses the code, else -32000).
	Tunnel(ctx context.Context, capability string) (TunnelFunc, error)
}

// TunnelFunc serves the raw bytes of one tunnel after its tunnel.open
// reply; it owns conn and closes it when done. ctx ends when the Server
// closes.
type TunnelFunc func(ctx context.Context, conn net.Conn)

// Session is one control session. Its methods are called from one
// goroutine at a time (the connection that holds it); errors that are an
// *Error keep their code, others are -32000.
type Session interface {
	// Bindings are the session's capabilities for the hello reply.
	Bindings() []Binding
	// Start starts task id, replacing the session's own task if any; the
	// result is the tasks.start reply ({"prompt": ...}).
	Start(ctx context.Context, id string, args map[string]any) (any, error)
	// Grade grades the task in progress and ends it; with none it returns
	// an *Error with CodeInvalidRequest.
	Grade(ctx context.Context, params map[string]any) (any, error)
	// Cancel ends the task in progress, if any.
	Cancel(ctx context.Context) error
	// InProgress reports a started task not yet graded or cancelled: such
	// a session is parked when its connection drops, others are ended.
	InProgress() bool
	// Close ends the session and releases everything it holds.
	Close(ctx context.Context)
}

// Limits bound what one peer can make a Server hold. Zero fields take the
// defaults below.
type Limits struct {
	MaxFrame        int           // bytes in one frame; 1 MiB
	FirstFrame      time.Duration // a new connection's first frame, whole; 10 s
	Frame           time.Duration // any frame once its first byte arrived; 10 s
	HeartbeatWindow time.Duration // silence on an idle session, and a parked session's wait; 150 s
	WriteTimeout    time.Duration // one frame written; 30 s
	MaxConns        int           // connections at once, control and tunnel; 1024
	CloseTimeout    time.Duration // Session.Close; 2 min
}

// HUD's client sends its heartbeat hello every 120 s and gives up after 5 s
// more; the default window allows that and some slack.
const (
	DefaultHeartbeatInterval = 120 * time.Second
	DefaultHeartbeatWindow   = 150 * time.Second
)

func (l Limits) withDefaults() Limits {
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if l.MaxFrame <= 0 {
		l.MaxFrame = 1 << 20
	}
	if l.MaxConns <= 0 {
		l.MaxConns = 1024
	}
	set(&l.FirstFrame, 10*time.Second)
	set(&l.Frame, 10*time.Second)
	set(&l.HeartbeatWindow, DefaultHeartbeatWindow)
	set(&l.WriteTimeout, 30*time.Second)
	set(&l.CloseTimeout, 2*time.Minute)
	return l
}

// Server serves the HUD protocol for one Env.
type Server struct {
	env Env
	lim Limits
	log *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	slots  chan struct{}
	wg     sync.WaitGroup

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]struct{}
	sessions  map[string]*entry
}

// entry is a session the server knows: live on a connection or parked.
type entry struct {
	id    string
	s     Session
	live  bool
	timer *time.Timer
}

// NewServer makes a server for env; log may be nil.
func NewServer(env Env, lim Limits, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	lim = lim.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		env: env, lim: lim, log: log, ctx: ctx, cancel: cancel,
		slots:     make(chan struct{}, lim.MaxConns),
		listeners: map[net.Listener]struct{}{},
		conns:     map[net.Conn]struct{}{},
		sessions:  map[string]*entry{},
	}
}

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("hud: server closed")

// Serve accepts connections on ln until Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	for {
		c, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		select {
		case s.slots <- struct{}{}:
		default:
			s.log.Warn("hud: connection refused: too many connections", "limit", s.lim.MaxConns)
			c.Close()
			continue
		}
		if !s.track(c) {
			<-s.slots
			c.Close()
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			release := sync.OnceFunc(func() {
				s.untrack(c)
				<-s.slots
			})
			if !s.handle(c, release) {
				release()
			}
		}()
	}
}

func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c net.Conn) {
	c.Close()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// Close stops listening, cuts every connection and ends every session.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for ln := range s.listeners {
		ln.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	s.mu.Lock()
	var rest []*entry
	for id, e := range s.sessions {
		if e.timer != nil {
			e.timer.Stop()
		}
		rest = append(rest, e)
		delete(s.sessions, id)
	}
	s.mu.Unlock()
	for _, e := range rest {
		s.closeSession(e)
	}
	return nil
}

// Sessions reports how many sessions are live and parked.
func (s *Server) Sessions() (live, parked int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.sessions {
		if e.live {
			live++
		} else {
			parked++
		}
	}
	return live, parked
}

// handle reads a connection's first frame, which decides what it is: a
// tunnel.open makes it a raw tunnel, anything else a control session. It
// reports whether it handed the connection on (a tunnel), in which case
// release runs when that connection is closed.
func (s *Server) handle(c net.Conn, release func()) bool {
	f := newFramer(c, s.lim.MaxFrame, s.lim.WriteTimeout)
	line, err := f.read(s.lim.FirstFrame, s.lim.FirstFrame)
	if err != nil {
		s.refuse(f, err)
		return false
	}
	var req Request
	if err := json.Unmarshal(line, &req); err != nil {
		_ = f.write(errorFrame(nil, CodeParseError, "parse error"))
		return false
	}
	if req.Method == MethodTunnelOpen {
		return s.tunnel(f, &req, release)
	}
	s.control(f, &req)
	return false
}

// refuse answers a frame that broke a limit, then the caller hangs up.
func (s *Server) refuse(f *framer, err error) {
	if errors.Is(err, ErrFrameTooLarge) {
		_ = f.write(errorFrame(nil, CodeInvalidRequest, err.Error()))
	}
}

func (s *Server) tunnel(f *framer, req *Request, release func()) bool {
	var p struct {
		Capability any `json:"capability"`
	}
	_ = json.Unmarshal(req.Params, &p)
	name, ok := p.Capability.(string)
	if !ok {
		_ = f.write(errorFrame(req.ID, CodeInvalidParams, "tunnel.open: 'capability' must be a string"))
		return false
	}
	serve, err := s.env.Tunnel(s.ctx, name)
	if err != nil {
		s.log.Warn("hud: refusing capability stream", "capability", name, "err", err)
		if hasID(req.ID) {
			_ = f.write(errorReply(req.ID, err))
		}
		return false
	}
	if hasID(req.ID) {
		if err := f.write(resultFrame(req.ID, map[string]any{"capability": name})); err != nil {
			return false
		}
	}
	// The connection stays counted against MaxConns, and cut by Close,
	// until whoever serves the tunnel closes it.
	serve(s.ctx, &ownedConn{Conn: f.rest(), release: release})
	return true
}

type ownedConn struct {
	net.Conn
	release func()
}

func (c *ownedConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// CloseWrite half-closes when the connection can.
func (c *ownedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// newSessionID is "sess-" and 128 random bits: the id is what resumes a
// parked session, so it must not be guessable.
func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "sess-" + hex.EncodeToString(b[:])
}

func hasID(id json.RawMessage) bool {
	return len(id) > 0 && !bytes.Equal(bytes.TrimSpace(id), []byte("null"))
}

// frame is a reply with its keys in the order HUD's reply() and error()
// write them.
type frame struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

func resultFrame(id json.RawMessage, result any) *frame {
	return &frame{JSONRPC: "2.0", ID: id, Result: result}
}

func errorFrame(id json.RawMessage, code int, msg string) *frame {
	if id == nil {
		id = json.RawMessage("null")
	}
	return &frame{JSONRPC: "2.0", ID: id, Error: &Error{Code: code, Message: msg}}
}

func errorReply(id json.RawMessage, err error) *frame {
	var e *Error
	if errors.As(err, &e) {
		return errorFrame(id, e.Code, e.Message)
	}
	return errorFrame(id, CodeServerError, err.Error())
}
