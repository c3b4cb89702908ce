package core

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/serve/dataplane"
)

// TeardownTimeout bounds one sandbox delete at expiry or shutdown, or of
// a sandbox an API made and let go.
const TeardownTimeout = 2 * time.Minute

// Labels the server puts on every sandbox it creates, through either API.
const (
	LauncherLabel = "berth.launcher"
	LauncherValue = "serve"
	IDLabel       = "berth.serve.id"
	// ServeLabelPrefix marks the labels clients may not set.
	ServeLabelPrefix = "berth.serve."
)

// Server is what berth serve's APIs share: one provider, one key file,
// one pool of sandboxes per key under the same limits, their records and
// TTL timers, and the metrics. Close deletes the sandboxes (unless
// Options.KeepOnClose); the APIs close first.
type Server struct {
	opts Options
	log  *slog.Logger
	p    *sandbox.Provider
	st   sandboxStore
	m    *Metrics
	caps sandbox.Capabilities

	mu          sync.Mutex
	portHeaders []string // of every PortCredentials an API added

	closeOnce sync.Once
	bg        sync.WaitGroup // expiry deletes in flight
}

// New validates opts, applies their defaults and builds the server.
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
	return s, nil
}

// Options are the server's, defaults applied; they do not change.
func (s *Server) Options() *Options { return &s.opts }

// Provider hands out the sandboxes.
func (s *Server) Provider() *sandbox.Provider { return s.p }

// Capabilities are the provider's.
func (s *Server) Capabilities() sandbox.Capabilities { return s.caps }

// Logger is where the server and its APIs log.
func (s *Server) Logger() *slog.Logger { return s.log }

// Metrics are the server's series.
func (s *Server) Metrics() *Metrics { return s.m }

// Reserve takes a slot and res for the key, or says which of its limits
// (Options.MaxSandboxesPerKey, KeyCeiling) a sandbox more would pass. A
// reservation is given back by Release, or taken over by the record Add
// makes findable (and then given back when the record goes).
func (s *Server) Reserve(keyID string, res sandbox.Resources) (over string) {
	return s.st.reserve(keyID, res, s.opts.MaxSandboxesPerKey, s.opts.KeyCeiling)
}

// Release gives back a reservation no record took.
func (s *Server) Release(keyID string, res sandbox.Resources) { s.st.release(keyID, res) }

// RetryAfter is how long a key over its limits waits: until its first
// sandbox ends, between a second and a minute.
func (s *Server) RetryAfter(keyID string) time.Duration {
	after := time.Second
	if end := s.st.soonestEnd(keyID); !end.IsZero() {
		after = min(max(time.Until(end), time.Second), time.Minute)
	}
	return after
}

// Add makes r findable; false when the server is closing.
func (s *Server) Add(r *Record) bool { return s.st.add(r) }

// Get returns the live record of the sandbox ID, or nil.
func (s *Server) Get(id string) *Record { return s.st.get(id) }

// ByToken returns the live record whose access token is token, or nil.
func (s *Server) ByToken(token string) *Record { return s.st.byTokenOf(token) }

// Snapshot returns the live records by start time, then ID; on a
// stateless server, those of other replicas without a handle.
func (s *Server) Snapshot() []*Record { return s.st.snapshot() }

// Live counts the live sandboxes.
func (s *Server) Live() int { return s.st.live() }

// Arm sets the sandbox's end to now + d and the timer that enforces it.
func (s *Server) Arm(rec *Record, d time.Duration) {
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

func (s *Server) expire(rec *Record, gen int) {
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
	ctx, cancel := context.WithTimeout(context.Background(), TeardownTimeout)
	defer cancel()
	if err := s.Delete(ctx, rec.ID, "timeout"); err != nil && sandbox.ClassOf(err) != sandbox.NotFound {
		s.log.Warn("deleting an expired sandbox failed; the provider's TTL will end it", "sandbox", rec.ID, "error", err)
	}
}

// Retime sets the end to now + d on the server and the provider; unless
// shorten, an end already later is kept.
func (s *Server) Retime(ctx context.Context, rec *Record, d time.Duration, shorten bool) error {
	if !shorten && time.Until(rec.Deadline()) >= d {
		return nil
	}
	if err := rec.Sandbox.SetTimeout(ctx, d); err != nil && sandbox.ClassOf(err) != sandbox.NotSupported {
		return err
	}
	s.Arm(rec, d)
	return nil
}

// Delete removes the record (exactly one caller wins), closes what the
// server holds of it and destroys the sandbox; reason is the metrics'.
// Unknown is NotFound.
func (s *Server) Delete(ctx context.Context, id, reason string) error {
	rec := s.st.take(id)
	if rec == nil {
		return sandbox.Errorf(sandbox.NotFound, "sandbox %q not found", id)
	}
	rec.stop()
	err := sandbox.IgnoreNotFound(rec.Sandbox.Delete(ctx))
	s.release(rec)
	s.m.Deletes.WithLabelValues(reason).Inc()
	s.log.Info("deleted sandbox", "sandbox", rec.ID, "backend_id", rec.Sandbox.ID(), "key", rec.KeyID, "reason", reason, "error", err)
	return err
}

// stop stops the record's timer for good.
func (r *Record) stop() {
	r.mu.Lock()
	r.gen++
	if r.timer != nil {
		r.timer.Stop()
	}
	r.mu.Unlock()
}

// Abandon deletes the sandbox of a record that never became findable
// (counted as a failed create) and gives back its reservation.
func (s *Server) Abandon(rec *Record) {
	s.m.Creates.WithLabelValues("failed").Inc()
	rec.stop()
	ctx, cancel := context.WithTimeout(context.Background(), TeardownTimeout)
	defer cancel()
	_ = rec.Sandbox.Delete(ctx)
	s.release(rec)
}

// release closes what the server holds of a record and frees its slot.
func (s *Server) release(rec *Record) {
	if rec.Closer != nil {
		_ = rec.Closer.Close()
	}
	if rec.Ports != nil {
		_ = rec.Ports.Close()
	}
	_ = rec.Sandbox.Close()
	s.st.released(rec)
}

// AttachPlane gives rec its envd data plane and its ports: straight to
// the sandbox's own envd when the driver has one, else through the
// sandbox API.
func (s *Server) AttachPlane(ctx context.Context, rec *Record) error {
	onExec := func() { s.m.Execs.Inc() }
	rec.Ports = dataplane.NewPorts(rec.Sandbox, s.caps, dataplane.PortOptions{SandboxID: rec.ID, Logger: s.log.With("sandbox", rec.ID)})
	ep, err := rec.Sandbox.EnvdEndpoint(ctx)
	switch {
	case err == nil:
		px, err := dataplane.NewProxy(ep, dataplane.ProxyOptions{
			MaxUploadBytes: s.opts.MaxUploadBytes, OnExec: onExec,
			Logger: s.log.With("sandbox", rec.ID),
		})
		if err != nil {
			return err
		}
		rec.Plane = px
		return nil
	case sandbox.ClassOf(err) != sandbox.NotSupported:
		return err
	}
	h, err := dataplane.New(rec.Sandbox, dataplane.Options{HomeDir: s.opts.HomeDir, MaxUploadBytes: s.opts.MaxUploadBytes, OnExec: onExec})
	if err != nil {
		return err
	}
	rec.Plane, rec.Closer = h, h
	return nil
}

// Close deletes the server's sandboxes (unless KeepOnClose) and stops
// their timers. Call it after the APIs have closed and the http.Server has
// stopped taking calls.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		ids := s.st.closeAll()
		var wg sync.WaitGroup
		for _, id := range ids {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), TeardownTimeout)
				defer cancel()
				if s.opts.KeepOnClose {
					if r := s.st.take(id); r != nil {
						s.release(r)
					}
					return
				}
				_ = s.Delete(ctx, id, "shutdown")
			})
		}
		wg.Wait()
		s.bg.Wait()
	})
	return nil
}
