package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-sh/berth/internal/apikeys"
	"github.com/berth-sh/berth/session/engine"
	"github.com/berth-sh/berth/session/tito"
)

// Options configure a Server. Engine and Codec are required; zero bounds
// take the defaults below.
type Options struct {
	Engine engine.Engine
	Codec  *tito.Codec
	// Matcher compares replayed messages with stored ones (default strict;
	// Miles's --session-message-matcher).
	Matcher tito.Matcher
	// Tree makes new sessions v2 tree sessions (Miles's
	// --use-session-server v2) unless POST /sessions asks for
	// {"version": "v1"}; without it they are linear unless it asks for
	// "v2". A tree holds at most MaxTreeFactor x MaxSessionTokens ids.
	Tree bool
	// Keys, when set, are required on every route but /health, as a bearer
	// token or an x-api-key header.
	Keys       *apikeys.Keyring
	InstanceID string
	Logger     *slog.Logger
	// ExternalURL is the base URL other hosts reach the server at (a Gym
	// host, when the server listens on 0.0.0.0 behind a name); when set,
	// POST /sessions also answers "base_url": ExternalURL/sessions/<id>/v1,
	// an OpenAI base URL (policy_base_url) that clients use verbatim.
	ExternalURL string

	MaxBodyBytes     int64         // a request body (default 32 MiB)
	MaxMessages      int           // messages in one request (default 4096)
	MaxSessions      int           // live sessions (default 4096)
	MaxSessionTokens int           // accumulated ids of one session (default 1 Mi)
	IdleTimeout      time.Duration // a session unused this long is removed (default 30 min)
	// MaxBufferedBytes bounds the request bodies held in memory, all
	// requests together (default 32 x MaxBodyBytes, 1 GiB); one session's
	// requests hold at most 2 x MaxBodyBytes.
	MaxBufferedBytes int64
	// MaxTokenizingBytes bounds the bodies being parsed, rendered and
	// tokenized at once, by their length (default MaxBodyBytes): a turn
	// waits for room.
	MaxTokenizingBytes int64
}

func (o *Options) defaults() error {
	if o.Engine == nil || o.Codec == nil {
		return errors.New("session: Options.Engine and Options.Codec are required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	var err error
	if o.ExternalURL, err = ExternalURL(o.ExternalURL); err != nil {
		return err
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 32 << 20
	}
	if o.MaxBufferedBytes <= 0 {
		o.MaxBufferedBytes = 32 * o.MaxBodyBytes
	}
	if o.MaxTokenizingBytes <= 0 {
		o.MaxTokenizingBytes = o.MaxBodyBytes
	}
	if o.MaxBufferedBytes <= o.MaxBodyBytes {
		return fmt.Errorf("session: MaxBufferedBytes (%d) must be more than MaxBodyBytes (%d): a body of the limit must fit", o.MaxBufferedBytes, o.MaxBodyBytes)
	}
	if o.MaxMessages <= 0 {
		o.MaxMessages = 4096
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = 4096
	}
	if o.MaxSessionTokens <= 0 {
		o.MaxSessionTokens = 1 << 20
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 30 * time.Minute
	}
	if o.InstanceID == "" {
		o.InstanceID = newID()
	}
	return nil
}

// ExternalURL checks a base URL given as Options.ExternalURL and returns it
// without a trailing slash; "" stays "".
func ExternalURL(raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("session: external URL %q is not an http(s) base URL (scheme://host[:port][/prefix])", raw)
	}
	return strings.TrimRight(raw, "/"), nil
}

// Server is the session server.
type Server struct {
	opts    Options
	mux     *http.ServeMux
	metrics *metrics
	bounds  *bounds

	mu       sync.RWMutex
	sessions map[string]*session

	stop     context.CancelFunc
	reaperWG sync.WaitGroup
}

type session struct {
	id string
	// mu is held for prepare and commit, never across the engine call; the
	// handles of one tree share it.
	mu   *sync.Mutex
	traj tito.Trajectory
	// tree and branch, for a v2 session: the tree and this handle's
	// branch in it (nil for a linear one).
	tree    *tito.Tree
	branch  *tito.Branch
	ab      aborter // in-flight turns, and the abort that ends them
	closing atomic.Bool
	used    atomic.Int64 // unix nanoseconds of the last use
	held    atomic.Int64 // bytes of its requests' bodies in memory
}

func (s *session) touch() { s.used.Store(time.Now().UnixNano()) }

// New returns a server; Close stops its idle-session reaper.
func New(o Options) (*Server, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	s := &Server{opts: o, sessions: map[string]*session{}, bounds: newBounds(o)}
	s.metrics = newMetrics(func() float64 {
		s.mu.RLock()
		defer s.mu.RUnlock()
		return float64(len(s.sessions))
	}, func() float64 { return float64(s.bounds.buffered.Load()) })
	s.routes()
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	s.reaperWG.Add(1)
	go s.reap(ctx)
	return s, nil
}

// Close stops the reaper. Sessions stay readable until the server is
// dropped.
func (s *Server) Close() {
	s.stop()
	s.reaperWG.Wait()
}

func (s *Server) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /health", s.health)
	m.Handle("GET /metrics", s.metrics.handler())
	m.HandleFunc("POST /sessions", s.auth(s.create))
	m.HandleFunc("GET /sessions/{id}", s.auth(s.get))
	m.HandleFunc("DELETE /sessions/{id}", s.auth(s.delete))
	m.HandleFunc("POST /sessions/{id}/v1/chat/completions", s.auth(func(w http.ResponseWriter, r *http.Request) { s.chat(w, r, false) }))
	m.HandleFunc("POST /sessions/{id}/v1/messages", s.auth(func(w http.ResponseWriter, r *http.Request) { s.chat(w, r, true) }))
	m.HandleFunc("POST /sessions/{id}/samples", s.auth(s.samples))
	s.treeRoutes(m)
	s.abortRoutes(m)
	m.HandleFunc("/sessions/{id}/{path...}", s.auth(s.proxy))
	s.mux = m
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	if s.opts.Keys == nil {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("x-api-key")
		if a := r.Header.Get("Authorization"); key == "" && strings.HasPrefix(a, "Bearer ") {
			key = strings.TrimPrefix(a, "Bearer ")
		}
		if _, ok := s.opts.Keys.Check(key); !ok {
			s.metrics.authFails.Inc()
			writeError(w, http.StatusUnauthorized, "unauthenticated: a valid API key is required (Authorization: Bearer or x-api-key)")
			return
		}
		h(w, r)
	}
}

func newID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40 // a version-4 UUID, as hex
	b[8] = b[8]&0x3f | 0x80
	return hex.EncodeToString(b[:])
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "session_server_instance_id": s.opts.InstanceID})
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	tree, err := s.wantsTree(w, r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	sess := &session{id: newID(), mu: new(sync.Mutex)}
	sess.traj.MaxTokens = s.opts.MaxSessionTokens
	if tree {
		sess.tree = &tito.Tree{MaxTokens: s.opts.MaxSessionTokens, MaxStored: MaxTreeFactor * s.opts.MaxSessionTokens}
		sess.branch = sess.tree.NewBranch(sess.id)
	}
	if !s.add(w, sess) {
		return
	}
	reply := map[string]string{"session_id": sess.id}
	if s.opts.ExternalURL != "" {
		reply["base_url"] = s.opts.ExternalURL + "/sessions/" + sess.id + "/v1"
	}
	if tree {
		reply["version"] = "v2"
	}
	writeJSON(w, http.StatusOK, reply)
}

// add registers a new session, or answers 429 when there are too many.
func (s *Server) add(w http.ResponseWriter, sess *session) bool {
	sess.touch()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sessions) >= s.opts.MaxSessions {
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf("too many sessions (%d): delete finished ones", s.opts.MaxSessions))
		return false
	}
	s.sessions[sess.id] = sess
	return true
}

// lookup finds a live session; it writes the 404 itself.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request) *session {
	id := r.PathValue("id")
	s.mu.RLock()
	sess := s.sessions[id]
	s.mu.RUnlock()
	if sess == nil || sess.closing.Load() {
		writeError(w, http.StatusNotFound, "session not found: session_id="+clipID(id))
		return nil
	}
	sess.touch()
	return sess
}

func clipID(id string) string {
	if len(id) > 64 {
		return id[:64] + "..."
	}
	return id
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	sess := s.lookup(w, r)
	if sess == nil {
		return
	}
	if !sess.closing.CompareAndSwap(false, true) {
		writeError(w, http.StatusNotFound, "session not found: session_id="+sess.id)
		return
	}
	// Wait for an in-flight prepare or commit, then drop the session.
	sess.mu.Lock()
	s.mu.Lock()
	delete(s.sessions, sess.id)
	s.mu.Unlock()
	sess.mu.Unlock()
	sess.ab.drop()
	w.WriteHeader(http.StatusNoContent)
}

// reap removes sessions idle for longer than IdleTimeout.
func (s *Server) reap(ctx context.Context) {
	defer s.reaperWG.Done()
	every := min(s.opts.IdleTimeout/4, time.Minute)
	t := time.NewTicker(max(every, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cutoff := time.Now().Add(-s.opts.IdleTimeout).UnixNano()
		s.mu.Lock()
		for id, sess := range s.sessions {
			if sess.used.Load() < cutoff && sess.mu.TryLock() {
				sess.closing.Store(true)
				delete(s.sessions, id)
				sess.mu.Unlock()
				sess.ab.drop()
				s.metrics.expired.Inc()
			}
		}
		s.mu.Unlock()
	}
}
