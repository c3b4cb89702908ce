package openenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/berth-sh/berth/internal/httpserve"
)

// Env is one environment session. The server calls it from one goroutine
// at a time.
type Env interface {
	// Reset starts an episode; args are the reset message's data.
	Reset(ctx context.Context, args map[string]json.RawMessage) (*Observation, error)
	// Step carries out one action, already validated against Info.Action.
	Step(ctx context.Context, action json.RawMessage) (*Observation, error)
	// State is the environment's state, the data of a state frame.
	State(ctx context.Context) (any, error)
	// Close releases what the session holds. It is called once per Env,
	// with a context that outlives the client's connection.
	Close(ctx context.Context) error
}

// Factory makes the Env of one session (or of one stateless HTTP call).
type Factory func(ctx context.Context) (Env, error)

// Info describes an environment: its metadata at /metadata, its models at
// /schema, and the model actions are validated against.
type Info struct {
	Name             string // also the factory name of FACTORY_ERROR
	Description      string
	Version          string
	Author           string
	DocumentationURL string
	Readme           string
	Action           *Model
	Observation      *Model
	State            *Model
}

// Authenticator checks a presented key (*apikeys.Keyring is one).
type Authenticator interface {
	Check(key string) (id string, ok bool)
}

// Options configure a Server.
type Options struct {
	Factory Factory
	Info    Info
	// MaxConcurrentEnvs bounds the sessions open at once (and the HTTP
	// calls that make an Env); default 1, as OpenEnv's.
	MaxConcurrentEnvs int
	// IdleTimeout closes a session that sent nothing for this long; zero
	// means DefaultIdleTimeout, negative never.
	IdleTimeout time.Duration
	// MaxFrameBytes bounds an incoming frame or request body; default
	// DefaultMaxFrameBytes. A larger frame closes the connection (1009).
	MaxFrameBytes int64
	// WriteTimeout bounds sending one answer; default 1 minute.
	WriteTimeout time.Duration
	// CloseTimeout bounds Env.Close after a session ends; default 5 minutes.
	CloseTimeout time.Duration
	// Auth, when set, is required of every call but GET /health: the key
	// as "Authorization: Bearer KEY" or "X-API-Key: KEY".
	Auth   Authenticator
	Logger *slog.Logger
}

// Defaults of Options.
const (
	DefaultIdleTimeout   = time.Hour
	DefaultMaxFrameBytes = 16 << 20
)

func (o *Options) withDefaults() error {
	if o.Factory == nil {
		return errors.New("openenv: Options.Factory is required")
	}
	if o.Info.Name == "" || o.Info.Action == nil || o.Info.Observation == nil || o.Info.State == nil {
		return errors.New("openenv: Options.Info needs a name and the Action, Observation and State models")
	}
	if o.MaxConcurrentEnvs <= 0 {
		o.MaxConcurrentEnvs = 1
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.MaxFrameBytes <= 0 {
		o.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = time.Minute
	}
	if o.CloseTimeout <= 0 {
		o.CloseTimeout = 5 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Server serves one environment over OpenEnv's HTTP routes and /ws.
type Server struct {
	opts Options
	mux  *http.ServeMux

	mu     sync.Mutex
	active int
	closed bool

	ctx      context.Context // ends every session when the server closes
	cancel   context.CancelFunc
	sessions sync.WaitGroup
}

// New builds a server.
func New(opts Options) (*Server, error) {
	if err := opts.withDefaults(); err != nil {
		return nil, err
	}
	s := &Server{opts: opts, mux: http.NewServeMux()}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mux.HandleFunc("GET /health", s.health)
	s.mux.HandleFunc("GET /metadata", s.auth(s.metadata))
	s.mux.HandleFunc("GET /schema", s.auth(s.schema))
	s.mux.HandleFunc("GET /state", s.auth(s.state))
	s.mux.HandleFunc("POST /reset", s.auth(s.reset))
	s.mux.HandleFunc("POST /step", s.auth(s.step))
	s.mux.HandleFunc("GET /ws", s.auth(s.serveWS))
	s.mux.HandleFunc("/", s.notFound)
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Active is the number of sessions (and Env-making HTTP calls) open now.
func (s *Server) Active() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active
}

// Close ends every session, closing their Envs, and waits for them. Calls
// after it are refused.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.sessions.Wait()
	return nil
}

// CapacityError is a session refused because MaxConcurrentEnvs are open.
type CapacityError struct{ Active, Max int }

func (e *CapacityError) Error() string { return capacityMessage(e.Active, e.Max) }

// reserve takes a session slot; the caller releases it after Env.Close.
func (s *Server) reserve() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("the server is shutting down")
	}
	if s.active >= s.opts.MaxConcurrentEnvs {
		return &CapacityError{Active: s.active, Max: s.opts.MaxConcurrentEnvs}
	}
	s.active++
	s.sessions.Add(1)
	return nil
}

// release frees the slot and ends the session's count.
func (s *Server) release() {
	s.free()
	s.sessions.Done()
}

// free gives the slot back; Close still waits for the session to end.
func (s *Server) free() {
	s.mu.Lock()
	s.active--
	s.mu.Unlock()
}

// closeEnv closes env with a context of its own: the client may be gone,
// and what the Env holds (a sandbox) must go all the same.
func (s *Server) closeEnv(env Env) {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.CloseTimeout)
	defer cancel()
	if err := env.Close(ctx); err != nil {
		s.opts.Logger.Warn("closing an environment failed", "env", s.opts.Info.Name, "error", err)
	}
}

func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	if s.opts.Auth == nil {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("X-API-Key")
		if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && key == "" {
			key = strings.TrimSpace(b)
		}
		if _, ok := s.opts.Auth.Check(key); key == "" || !ok {
			// Never echo what was presented.
			writeJSON(w, http.StatusUnauthorized, map[string]string{"detail": "a valid API key is required (Authorization: Bearer KEY or X-API-Key)"})
			return
		}
		h(w, r)
	}
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/health", "/metadata", "/schema", "/state", "/reset", "/step", "/ws":
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"detail": "Method Not Allowed"})
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"detail": "Not Found"})
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"detail":"Internal Server Error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// ListenAndServe serves opts on addr until ctx ends, then closes every
// session. ready, when set, gets the base URL once the listener is open.
func ListenAndServe(ctx context.Context, addr string, opts Options, ready func(baseURL string)) error {
	s, err := New(opts)
	if err != nil {
		return err
	}
	defer s.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if ready != nil {
		ready("http://" + ln.Addr().String())
	}
	s.opts.Logger.Info("serving OpenEnv", "env", opts.Info.Name, "addr", ln.Addr().String(), "max_concurrent_envs", s.opts.MaxConcurrentEnvs)
	// Sessions end first (their Envs closed), then the listener; hijacked
	// WebSocket connections are not the http.Server's to wait for.
	if err := httpserve.Serve(ctx, ln, s, httpserve.Options{BeforeShutdown: func() { _ = s.Close() }}); err != nil {
		return fmt.Errorf("openenv: %w", err)
	}
	return nil
}
