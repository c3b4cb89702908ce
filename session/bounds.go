package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// The server's memory is bounded in two places, because a turn costs
// memory twice: its body, from the first byte read until the reply, and
// the parse, rendering and tokenization of that body, a multiple of it.
//
//   - bodies: the bytes of request bodies held, counted as they arrive
//     (never reserved ahead from a Content-Length, so a client that sends
//     nothing holds nothing), at most MaxBufferedBytes in all and twice
//     MaxBodyBytes per session. Past either the request is refused at
//     once, 503 or 429 with Retry-After (OpenAI clients retry both): a
//     wait could deadlock bodies half read on one another.
//   - tokenizing: the bodies being parsed and tokenized, weighed by their
//     length, at most MaxTokenizingBytes at once. A turn waits for room
//     until its client goes away: the work is short, and a harness that
//     sees no error is the one an RL run wants.
type bounds struct {
	buffered   atomic.Int64 // what bodies holds, for the gauge
	bodies     *semaphore.Weighted
	tokenizing *semaphore.Weighted
	tokCap     int64
	perSession int64
}

func newBounds(o Options) *bounds {
	return &bounds{bodies: semaphore.NewWeighted(o.MaxBufferedBytes), tokenizing: semaphore.NewWeighted(o.MaxTokenizingBytes),
		tokCap: o.MaxTokenizingBytes, perSession: 2 * o.MaxBodyBytes}
}

// errBusy is a body refused for want of room.
type errBusy struct {
	status int
	msg    string
}

func (e *errBusy) Error() string { return e.msg }

// held is one request's share of the body budget.
type held struct {
	b    *bounds
	sess *session
	n    int64
}

func (h *held) grow(n int64) error {
	if h.sess.held.Add(n) > h.b.perSession {
		h.sess.held.Add(-n)
		return &errBusy{http.StatusTooManyRequests, fmt.Sprintf("this session's requests would hold more than %d bytes at once: retry when one is answered", h.b.perSession)}
	}
	if !h.b.bodies.TryAcquire(n) {
		h.sess.held.Add(-n)
		return &errBusy{http.StatusServiceUnavailable, "the server holds as many request bytes as it may: retry shortly"}
	}
	h.n += n
	h.b.buffered.Add(n)
	return nil
}

// release gives the request's bytes back; the handler defers it.
func (h *held) release() {
	if h.n > 0 {
		h.sess.held.Add(-h.n)
		h.b.buffered.Add(-h.n)
		h.b.bodies.Release(h.n)
		h.n = 0
	}
}

// read reads a body into memory (r is bounded by http.MaxBytesReader),
// taking room from the budget as the buffer grows: doubling from 32 KiB,
// never past a declared length or one byte past the limit (room to see
// the end).
func (h *held) read(r io.Reader, declared, limit int64) ([]byte, error) {
	var buf []byte
	for {
		if len(buf) == cap(buf) {
			n := int64(len(buf))
			want := max(2*n, 32<<10)
			if declared >= n {
				want = min(want, declared+1)
			}
			want = min(want, limit+1) // > n: a body past the limit has failed below
			if err := h.grow(want - n); err != nil {
				return nil, err
			}
			buf = append(make([]byte, 0, want), buf...)
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case errors.Is(err, io.EOF):
			return buf, nil
		case err != nil:
			return nil, err
		}
	}
}

// tokenize runs f once the body's weight fits among the bodies being
// tokenized; it fails only when ctx ends first.
func (b *bounds) tokenize(ctx context.Context, weight int64, f func()) error {
	weight = min(max(weight, 1), b.tokCap)
	if err := b.tokenizing.Acquire(ctx, weight); err != nil {
		return err
	}
	defer b.tokenizing.Release(weight)
	f()
	return nil
}

// sessionBody finds the request's session and reads its body within the
// bounds; it writes the error itself. The handler defers release.
func (s *Server) sessionBody(w http.ResponseWriter, r *http.Request) (*session, []byte, func(), bool) {
	sess := s.lookup(w, r)
	if sess == nil {
		return nil, nil, nil, false
	}
	h := &held{b: s.bounds, sess: sess}
	body, ok := s.readBody(w, r, h)
	if !ok {
		h.release()
		return nil, nil, nil, false
	}
	return sess, body, h.release, true
}

// readBody reads a request's body; it writes the error itself. A body
// declared longer than the limit is refused before a byte of it is read.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, h *held) ([]byte, bool) {
	limit := s.opts.MaxBodyBytes
	if r.ContentLength > limit {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body of %d bytes is over the limit of %d bytes", r.ContentLength, limit))
		return nil, false
	}
	data, err := h.read(http.MaxBytesReader(w, r.Body, limit), r.ContentLength, limit)
	var tooBig *http.MaxBytesError
	var busy *errBusy
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is over the limit of %d bytes", limit))
		return nil, false
	case errors.As(err, &busy):
		s.metrics.busy.Inc()
		w.Header().Set("Retry-After", "1")
		writeError(w, busy.status, busy.msg)
		return nil, false
	case err != nil:
		writeError(w, http.StatusBadRequest, "reading the request body: "+err.Error())
		return nil, false
	}
	return data, true
}
