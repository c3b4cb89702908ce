package serve

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/sandbox"
)

// teardownTimeout bounds one sandbox delete at expiry or shutdown.
const teardownTimeout = 2 * time.Minute

// Server is the E2B API over one provider. It is an http.Handler; Close
// stops its timers and deletes its sandboxes.
type Server struct {
	opts    Options
	log     *slog.Logger
	p       *sandbox.Provider
	st      sandboxStore
	m       *metrics
	control http.Handler
	data    http.Handler
	osb     *osbServer // nil when the OpenSandbox API is off
	tpl     *templates // E2B template builds (template_*.go)
	caps    sandbox.Capabilities

	closeOnce sync.Once
	bg        sync.WaitGroup // expiry deletes in flight
}

var _ http.Handler = (*Server)(nil)

// New validates opts and builds the server.
func New(opts Options) (*Server, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	s := &Server{opts: opts, log: opts.Logger, p: opts.Provider, caps: opts.Provider.Capabilities()}
	if opts.Stateless {
		s.st = newSharedStore(s)
	} else {
		s.st = newStore()
	}
	s.m = newMetrics(func() float64 { return float64(s.st.live()) })
	var err error
	if s.tpl, err = newTemplates(s); err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	s.routes(mux)
	s.control = s.observe("control", controlRoute, mux)
	s.data = s.observe("data", envdRoute, http.HandlerFunc(s.serveData))
	if !opts.OpenSandbox.Disabled {
		s.osb = newOSB(s)
	}
	return s, nil
}

// ServeHTTP sends a request to the data plane when it names a sandbox (by
// header or host) or is an envd path, else to the control plane.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.isData(r) {
		s.data.ServeHTTP(w, r)
		return
	}
	if s.osb != nil && s.osb.match(r) {
		s.osb.ServeHTTP(w, r)
		return
	}
	s.control.ServeHTTP(w, r)
}

// isData tells data-plane calls apart; only /health exists on both planes,
// and goes to the data plane when a sandbox is named (by header, host or
// access token).
func (s *Server) isData(r *http.Request) bool {
	if r.Header.Get(e2bapi.SandboxIDHeader) != "" {
		return true
	}
	if _, _, ok := s.hostTarget(r.Host); ok {
		return true
	}
	p := r.URL.Path
	if p == "/health" && r.Header.Get(envd.AccessTokenHeader) != "" {
		return true // SDKs 2.7 - 2.14.0: isRunning names the sandbox by token alone
	}
	return p == "/files" || strings.HasPrefix(p, "/process.Process/") || strings.HasPrefix(p, "/filesystem.Filesystem/")
}

// Close deletes the server's sandboxes (unless KeepOnClose) and stops
// their timers. Call it after the http.Server has stopped taking calls.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		if s.osb != nil {
			s.osb.close() // creates in flight delete what they made
		}
		s.tpl.close() // builds in flight end and delete their sandboxes
		ids := s.st.closeAll()
		var wg sync.WaitGroup
		for _, id := range ids {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), teardownTimeout)
				defer cancel()
				if s.opts.KeepOnClose {
					if r := s.st.take(id); r != nil {
						s.release(r)
					}
					return
				}
				_ = s.deleteSandbox(ctx, id, "shutdown")
			})
		}
		wg.Wait()
		s.bg.Wait()
	})
	return nil
}

// authKey checks X-API-KEY and returns the key's ID; on failure it has
// answered 401.
func (s *Server) authKey(w http.ResponseWriter, r *http.Request) (string, bool) {
	id, ok := s.opts.Keys.Check(r.Header.Get("X-API-KEY"))
	if !ok {
		s.m.authFails.WithLabelValues("control").Inc()
		writeError(w, http.StatusUnauthorized, "Invalid API key: send a key of this server as X-API-KEY")
		return "", false
	}
	return id, true
}

// owned returns the key's sandbox by ID; another key's sandbox is as
// unknown as a missing one. On failure it has answered 404.
func (s *Server) owned(w http.ResponseWriter, r *http.Request, keyID string) *record {
	id := r.PathValue("sandboxID")
	rec := s.st.get(id)
	if rec == nil || rec.keyID != keyID {
		writeError(w, http.StatusNotFound, "sandbox %q not found", id)
		return nil
	}
	return rec
}

// arm sets the sandbox's end to now + d and the timer that enforces it.
func (s *Server) arm(rec *record, d time.Duration) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.gen++
	gen := rec.gen
	rec.endAt = time.Now().Add(d)
	if rec.timer != nil {
		rec.timer.Stop()
	}
	rec.timer = time.AfterFunc(d, func() { s.expire(rec, gen) })
}

func (s *Server) expire(rec *record, gen int) {
	rec.mu.Lock()
	stale := rec.gen != gen
	rec.mu.Unlock()
	if stale {
		return
	}
	if ss, ok := s.st.(*sharedStore); ok && ss.extended(rec) {
		return // another replica moved its end
	}
	s.bg.Add(1)
	defer s.bg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), teardownTimeout)
	defer cancel()
	if err := s.deleteSandbox(ctx, rec.id, "timeout"); err != nil && sandbox.ClassOf(err) != sandbox.NotFound {
		s.log.Warn("deleting an expired sandbox failed; the provider's TTL will end it", "sandbox", rec.id, "error", err)
	}
}

// deleteSandbox removes the record (exactly one caller wins), closes its
// data plane and destroys the sandbox. Unknown is NotFound.
func (s *Server) deleteSandbox(ctx context.Context, id, reason string) error {
	rec := s.st.take(id)
	if rec == nil {
		return sandbox.Errorf(sandbox.NotFound, "sandbox %q not found", id)
	}
	rec.mu.Lock()
	rec.gen++
	if rec.timer != nil {
		rec.timer.Stop()
	}
	rec.mu.Unlock()
	err := sandbox.IgnoreNotFound(rec.sb.Delete(ctx))
	s.release(rec)
	s.m.deletes.WithLabelValues(reason).Inc()
	s.log.Info("deleted sandbox", "sandbox", rec.id, "backend_id", rec.sb.ID(), "key", rec.keyID, "reason", reason, "error", err)
	return err
}

// release closes what the server holds of a record and frees its slot.
func (s *Server) release(rec *record) {
	if rec.close != nil {
		_ = rec.close.Close()
	}
	if rec.ports != nil {
		_ = rec.ports.Close()
	}
	_ = rec.sb.Close()
	s.st.released(rec)
}
