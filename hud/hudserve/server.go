package hudserve

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/berth-sh/berth/harbor/task"
	"github.com/berth-sh/berth/hud"
	"github.com/berth-sh/berth/hud/shellserve"
	"github.com/berth-sh/berth/internal/httpserve"
	"github.com/berth-sh/berth/sandbox"
)

// Capability names in the hello reply (HUD's defaults for these protocols).
const (
	CapabilityMCP = "tools"
	CapabilitySSH = "shell"
	// SSHUser is the user the shell capability accepts.
	SSHUser = "agent"
)

// Options configure a Server.
type Options struct {
	Provider *sandbox.Provider
	// Tasks are the tasks served, by name; tasks with error problems are
	// refused by New.
	Tasks []*task.Task
	// Advertise is the host:port put in bindings; "" uses the listener's.
	Advertise string
	Limits    hud.Limits
	// TTLMargin is how long a sandbox may outlive its task's limits before
	// the provider removes it (the registry entry's value).
	TTLMargin time.Duration
	// MaxSandboxes bounds the sandboxes alive at once; 64.
	MaxSandboxes int
	// HostKey is the SSH host key; nil generates one.
	HostKey ssh.Signer
	// Name and Version name the environment in hello replies.
	Name, Version string
	Logger        *slog.Logger
	// Events, when set, hears each sandbox created and deleted. It must not
	// block.
	Events func(Event)
}

// Event is a sandbox created for, or deleted from, a session.
type Event struct {
	Session string
	Task    string
	Sandbox string
	Deleted bool
}

// Server is a HUD environment of Harbor tasks.
type Server struct {
	o     Options
	log   *slog.Logger
	hud   *hud.Server
	tasks map[string]*task.Task
	names []string
	ssh   *shellserve.SSHServer
	http  *http.Server
	conns *connListener
	pub   string // the host key, authorized_keys form

	mu        sync.Mutex
	advertise string
	sessions  map[string]*session
	byKey     map[string]string // marshalled client public key -> session id
	live      int               // sandboxes alive
}

// New makes a server; Serve starts it.
func New(o Options) (*Server, error) {
	if o.Provider == nil {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "hudserve: no provider")
	}
	if o.MaxSandboxes <= 0 {
		o.MaxSandboxes = 64
	}
	if o.Name == "" {
		o.Name = "berth-harbor"
	}
	if o.Version == "" {
		o.Version = "0"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{o: o, log: o.Logger, tasks: map[string]*task.Task{}, advertise: o.Advertise,
		sessions: map[string]*session{}, byKey: map[string]string{}}
	for _, t := range o.Tasks {
		if err := t.Err(); err != nil {
			return nil, fmt.Errorf("task %s: %w", t.Name, err)
		}
		if _, dup := s.tasks[t.Name]; dup {
			return nil, sandbox.Errorf(sandbox.InvalidArgument, "two tasks are named %q", t.Name)
		}
		s.tasks[t.Name] = t
		s.names = append(s.names, t.Name)
	}
	if len(s.tasks) == 0 {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "hudserve: no tasks to serve")
	}
	if o.HostKey == nil {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		if o.HostKey, err = ssh.NewSignerFromKey(priv); err != nil {
			return nil, err
		}
	}
	s.pub = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(o.HostKey.PublicKey())))
	s.ssh = shellserve.NewSSH(shellserve.SSHOptions{HostKey: o.HostKey, Authorize: s.authorizeSSH, Target: s.targetOf, Logger: o.Logger})
	s.conns = newConnListener()
	s.http = httpserve.NewServer(http.HandlerFunc(s.serveMCP), 0)
	s.http.ErrorLog = slog.NewLogLogger(o.Logger.Handler(), slog.LevelDebug)
	s.hud = hud.NewServer(s, o.Limits, o.Logger)
	return s, nil
}

// Serve answers the HUD protocol on ln until Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.advertise == "" {
		s.advertise = ln.Addr().String()
	}
	s.mu.Unlock()
	go func() { _ = s.http.Serve(s.conns) }()
	return s.hud.Serve(ln)
}

// Close stops serving and deletes every session's sandbox.
func (s *Server) Close() error {
	err := s.hud.Close()
	s.conns.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.http.Shutdown(ctx)
	return err
}

// Sessions reports the live and parked control sessions.
func (s *Server) Sessions() (live, parked int) { return s.hud.Sessions() }

// Sandboxes reports how many sandboxes the server holds.
func (s *Server) Sandboxes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live
}

// Info implements hud.Env.
func (s *Server) Info() hud.EnvInfo { return hud.EnvInfo{Name: s.o.Name, Version: s.o.Version} }

// ListTasks implements hud.Env.
func (s *Server) ListTasks(context.Context) ([]hud.TaskEntry, error) {
	out := make([]hud.TaskEntry, 0, len(s.names))
	for _, n := range s.names {
		out = append(out, hud.TaskEntry{ID: n, Description: firstLine(s.tasks[n].Instruction, 200), Args: hud.NoArgs()})
	}
	return out, nil
}

func firstLine(s string, max int) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			if len(l) > max {
				l = l[:max] + "..."
			}
			return l
		}
	}
	return ""
}

// Tunnel implements hud.Env: "tools" is served by the MCP HTTP server,
// "shell" by the SSH server; the session is chosen inside each protocol.
func (s *Server) Tunnel(_ context.Context, name string) (hud.TunnelFunc, error) {
	switch name {
	case CapabilityMCP:
		return func(_ context.Context, c net.Conn) { s.conns.push(c) }, nil
	case CapabilitySSH:
		return s.ssh.ServeConn, nil
	}
	// As HUD's server words it: str() of a KeyError.
	return nil, hud.Errorf(hud.CodeServerError, "%s", hud.Repr("unknown capability: "+hud.Repr(name)))
}

func (s *Server) session(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[id]
}

func (s *Server) authorizeSSH(user string, key ssh.PublicKey) (string, bool) {
	if user != SSHUser {
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.byKey[string(key.Marshal())]
	return id, ok
}

func (s *Server) targetOf(ctx context.Context, id string) (shellserve.Target, error) {
	se := s.session(id)
	if se == nil {
		return shellserve.Target{}, errors.New("the session has ended")
	}
	return se.target(ctx)
}

// serveMCP routes /sessions/<id>/mcp to that session's MCP server once
// its bearer token checks out.
func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/sessions/")
	id, tail, _ := strings.Cut(rest, "/")
	if !ok || tail != "mcp" {
		http.NotFound(w, r)
		return
	}
	se := s.session(id)
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if se == nil || subtle.ConstantTimeCompare([]byte(token), []byte(se.token)) != 1 {
		w.Header().Set("WWW-Authenticate", "Bearer")
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	se.mcp.ServeHTTP(w, r)
}

// reserve takes a sandbox slot.
func (s *Server) reserve() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live >= s.o.MaxSandboxes {
		return sandbox.Errorf(sandbox.ResourceExhausted, "this server holds %d sandboxes, its limit; try again later", s.live)
	}
	s.live++
	return nil
}

func (s *Server) release() {
	s.mu.Lock()
	s.live--
	s.mu.Unlock()
}

func (s *Server) event(e Event) {
	if s.o.Events != nil {
		s.o.Events(e)
	}
}

// connListener hands tunnelled connections to the HTTP server.
type connListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newConnListener() *connListener {
	return &connListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *connListener) push(c net.Conn) {
	select {
	case l.ch <- c:
	case <-l.done:
		c.Close()
	}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *connListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }
