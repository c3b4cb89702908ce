package session

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Abort, after Miles's optional agent abort hook (radixark/miles at
// 31f1ca961a94cb860cec3b2dea34ec332bfa8f76: docs/user-guide/
// agentic-rollout.md "Optional teardown hook"; miles/utils/misc.py
// call_agent_abort_hook; examples/swe-agent-harbor-docker/
// swe_agent_function.py abort). When a rollout step has enough samples,
// Miles aborts the engine's in-flight requests, then calls abort(args) so
// that the agent side stops issuing turns and frees its sandboxes; the
// Harbor example posts {"session_server_instance_id": ...} to its agent
// server's /flush. Samples of what was cut off are ABORTED (Sample.Status
// "aborted"), and without --partial-rollout, which Miles refuses with a
// session server, they are not continued.
//
// Here the trainer's hook calls the session server: POST /abort (or
// /flush, the same body) aborts every session of this instance, POST
// /sessions/{id}/abort one. An aborted session's in-flight turns are
// stopped (the engine call's context is cancelled, nothing is committed,
// the client is answered 410), later turns are answered 410, and its
// samples are "aborted" with the reason in their metadata's abort_reason
// (the session metadata's too), where berth's rollouts put a cancelled
// trial's reason. GET /sessions/{id}/abort?wait=S waits up to S seconds
// (at most MaxAbortWait) for the abort: how a rollout learns to tear the
// trial's sandbox down.

// MaxAbortWait bounds one wait of GET /sessions/{id}/abort.
const MaxAbortWait = 30 * time.Second

// maxReason bounds an abort reason (it lands in every sample).
const maxReason = 1024

// DefaultAbortReason is the reason of an abort that gives none.
const DefaultAbortReason = "aborted through the session server"

// AbortedError is a turn refused or stopped because its session was
// aborted (HTTP 410).
type AbortedError struct{ Reason string }

func (e *AbortedError) Error() string { return "session aborted: " + e.Reason }

// aborter is a session's in-flight turns and the abort that ends them.
type aborter struct {
	mu      sync.Mutex
	reason  string
	aborted bool
	gone    bool // the session was deleted
	wake    chan struct{}
	turns   map[*int]context.CancelCauseFunc
}

// wakeLocked is the channel closed at the abort or the delete.
func (a *aborter) wakeLocked() chan struct{} {
	if a.wake == nil {
		a.wake = make(chan struct{})
	}
	return a.wake
}

// begin starts a turn: its context ends at the abort. It fails once the
// session is aborted.
func (a *aborter) begin(ctx context.Context) (context.Context, func(), error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.aborted {
		return nil, nil, &AbortedError{a.reason}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	key := new(int)
	if a.turns == nil {
		a.turns = map[*int]context.CancelCauseFunc{}
	}
	a.turns[key] = cancel
	return ctx, func() {
		a.mu.Lock()
		delete(a.turns, key)
		a.mu.Unlock()
		cancel(nil)
	}, nil
}

// abort marks the session aborted and cancels its in-flight turns; it
// reports whether this call did, and how many turns it stopped.
func (a *aborter) abort(reason string) (bool, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.aborted {
		return false, 0
	}
	a.aborted, a.reason = true, reason
	for _, cancel := range a.turns {
		cancel(&AbortedError{reason})
	}
	if !a.gone {
		close(a.wakeLocked())
	}
	return true, len(a.turns)
}

// drop wakes the waiters of a deleted session.
func (a *aborter) drop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.gone && !a.aborted {
		close(a.wakeLocked())
	}
	a.gone = true
}

// err is the session's *AbortedError, or nil.
func (a *aborter) err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.aborted {
		return &AbortedError{a.reason}
	}
	return nil
}

func (a *aborter) reasonOf() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.reason
}

func (s *Server) abortRoutes(m *http.ServeMux) {
	m.HandleFunc("POST /abort", s.auth(s.abortAll))
	m.HandleFunc("POST /flush", s.auth(s.abortAll))
	m.HandleFunc("POST /sessions/{id}/abort", s.auth(s.abortOne))
	m.HandleFunc("GET /sessions/{id}/abort", s.auth(s.abortWait))
}

// abortRequest is the body of the abort routes.
type abortRequest struct {
	Reason     string `json:"reason"`
	InstanceID string `json:"session_server_instance_id"`
}

// readAbort reads an abort body (empty is {}); it writes the error itself.
func readAbort(w http.ResponseWriter, r *http.Request) (abortRequest, bool) {
	var req abortRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
	if err == nil && len(bytes.TrimSpace(body)) > 0 {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid abort body: "+err.Error())
		return req, false
	}
	req.Reason = clipReason(req.Reason)
	return req, true
}

func clipReason(r string) string {
	r = strings.TrimSpace(strings.ToValidUTF8(r, "\uFFFD"))
	if r == "" {
		return DefaultAbortReason
	}
	if len(r) > maxReason {
		cut := maxReason
		for cut > 0 && !utf8.RuneStart(r[cut]) {
			cut--
		}
		r = r[:cut] + "..."
	}
	return r
}

// abortSession aborts one session: its in-flight turns stop; a tree
// branch's leaves are marked.
func (s *Server) abortSession(sess *session, reason string) (bool, int) {
	first, n := sess.ab.abort(reason)
	if first && sess.tree != nil {
		sess.mu.Lock()
		sess.branch.AbortReason = reason
		sess.mu.Unlock()
	}
	return first, n
}

func (s *Server) abortOne(w http.ResponseWriter, r *http.Request) {
	sess := s.lookup(w, r)
	if sess == nil {
		return
	}
	req, ok := readAbort(w, r)
	if !ok {
		return
	}
	_, n := s.abortSession(sess, req.Reason)
	writeJSON(w, http.StatusOK, map[string]any{"session_id": sess.id, "aborted": true, "reason": sess.ab.reasonOf(), "in_flight": n})
}

// abortAll aborts every live session, unless the body names another
// instance (then nothing: a trainer that posts to each of its servers
// aborts each one's own).
func (s *Server) abortAll(w http.ResponseWriter, r *http.Request) {
	req, ok := readAbort(w, r)
	if !ok {
		return
	}
	reply := map[string]any{"session_server_instance_id": s.opts.InstanceID, "aborted": 0, "in_flight": 0}
	if req.InstanceID != "" && req.InstanceID != s.opts.InstanceID {
		writeJSON(w, http.StatusOK, reply)
		return
	}
	s.mu.RLock()
	live := make([]*session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		live = append(live, sess)
	}
	s.mu.RUnlock()
	aborted, inFlight := 0, 0
	for _, sess := range live {
		if first, n := s.abortSession(sess, req.Reason); first {
			aborted++
			inFlight += n
		}
	}
	reply["aborted"], reply["in_flight"] = aborted, inFlight
	s.opts.Logger.Info("sessions aborted", "sessions", aborted, "in_flight", inFlight, "reason", req.Reason)
	writeJSON(w, http.StatusOK, reply)
}

// abortWait answers whether the session is aborted, waiting up to ?wait=
// seconds for it; a session deleted meanwhile is 404.
func (s *Server) abortWait(w http.ResponseWriter, r *http.Request) {
	sess := s.lookup(w, r)
	if sess == nil {
		return
	}
	wait := time.Duration(0)
	if q := r.URL.Query().Get("wait"); q != "" {
		secs, err := strconv.ParseFloat(q, 64)
		if err != nil || secs < 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("wait=%q is not a number of seconds", q))
			return
		}
		wait = min(time.Duration(secs*float64(time.Second)), MaxAbortWait)
	}
	sess.ab.mu.Lock()
	wake := sess.ab.wakeLocked()
	sess.ab.mu.Unlock()
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-wake:
		case <-t.C:
		case <-r.Context().Done():
		}
		t.Stop()
	}
	if err := sess.ab.err(); err != nil {
		writeJSON(w, http.StatusOK, map[string]any{"session_id": sess.id, "aborted": true, "reason": err.(*AbortedError).Reason})
		return
	}
	if sess.closing.Load() {
		writeError(w, http.StatusNotFound, "session not found: session_id="+sess.id)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"session_id": sess.id, "aborted": false})
}
