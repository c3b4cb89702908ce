package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/berth-sh/berth/session/engine"
	"github.com/berth-sh/berth/session/samples"
	"github.com/berth-sh/berth/session/tito"
)

// snapshot is a consistent copy of a session's state, taken under its lock
// and read without it (the trajectory's slices are never written in place).
type snapshot struct {
	traj tito.Trajectory
}

func (s *Server) snapshot(sess *session) snapshot {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	return snapshot{traj: sess.traj}
}

// Record is a turn as GET /sessions/{id} shows it.
type Record struct {
	Timestamp        float64         `json:"timestamp"`
	RequestTimestamp float64         `json:"request_timestamp"`
	Method           string          `json:"method"`
	Path             string          `json:"path"`
	Request          json.RawMessage `json:"request"`
	Response         json.RawMessage `json:"response"`
	StatusCode       int             `json:"status_code"`
}

// Metadata is a session's metadata: what GET shows and what the samples
// payload carries as session_metadata.
type Metadata struct {
	Mismatch            *[]tito.Mismatch `json:"tito_session_mismatch,omitempty"` // absent until there are ids to check
	MismatchCounts      map[string]int   `json:"mismatch_counts"`
	AccumulatedTokenIDs []int            `json:"accumulated_token_ids"`
	MaxTrimTokens       int              `json:"max_trim_tokens"`
	MismatchError       string           `json:"mismatch_error,omitempty"`
}

// Info is the body of GET /sessions/{id}.
type Info struct {
	SessionID string   `json:"session_id"`
	Records   []Record `json:"records"`
	Metadata  Metadata `json:"metadata"`
}

func (s *Server) metadata(snap snapshot) Metadata {
	md := Metadata{AccumulatedTokenIDs: snap.traj.Tokens(), MaxTrimTokens: s.opts.Codec.MaxTrimTokens()}
	if md.AccumulatedTokenIDs == nil {
		md.AccumulatedTokenIDs = []int{}
	}
	ms, err := s.opts.Codec.SessionMismatch(&snap.traj)
	if err != nil {
		md.MismatchError = err.Error()
	}
	if ms != nil {
		md.Mismatch = &ms
	}
	md.MismatchCounts = tito.Counts(ms)
	return md
}

// checked is the metadata of a snapshot, computed within the tokenizing
// bound (the check renders and tokenizes the whole transcript); it writes
// the error itself.
func (s *Server) checked(w http.ResponseWriter, r *http.Request, snap snapshot) (Metadata, bool) {
	var md Metadata
	if err := s.bounds.tokenize(r.Context(), 4*int64(len(snap.traj.Tokens())), func() { md = s.metadata(snap) }); err != nil {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "gave up waiting to tokenize: "+err.Error())
		return md, false
	}
	return md, true
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	sess := s.lookup(w, r)
	if sess == nil {
		return
	}
	snap := s.snapshot(sess)
	md, ok := s.checked(w, r, snap)
	if !ok {
		return
	}
	info := Info{SessionID: sess.id, Records: []Record{}, Metadata: md}
	for _, rec := range snap.traj.Records() {
		body := engine.RequestBody(s.opts.Engine.Dialect(), &engine.Request{Body: rec.Request, PromptIDs: rec.PromptIDs})
		if s.opts.Engine.Dialect() != engine.SGLang {
			body["input_ids"], _ = json.Marshal(rec.PromptIDs) // the prompt recorded, whoever rendered it
		}
		info.Records = append(info.Records, Record{Timestamp: rec.Timestamp, RequestTimestamp: rec.RequestTimestamp, Method: rec.Method,
			Path: rec.Path, Request: mustJSON(body), Response: rec.Response, StatusCode: rec.StatusCode})
	}
	writeJSON(w, http.StatusOK, info)
}

func (s *Server) samples(w http.ResponseWriter, r *http.Request) {
	sess, body, release, ok := s.sessionBody(w, r)
	if !ok {
		return
	}
	defer release()
	var params struct {
		MaxSeqLen *int `json:"max_seq_len"`
	}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, &params); err != nil {
			writeError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
			return
		}
	}
	if params.MaxSeqLen != nil && *params.MaxSeqLen <= 0 {
		writeError(w, http.StatusBadRequest, "max_seq_len must be positive")
		return
	}
	snap := s.snapshot(sess)
	md, ok := s.checked(w, r, snap)
	if !ok {
		return
	}
	s.metrics.checked.Inc()
	for t, n := range md.MismatchCounts {
		s.metrics.mismatches.WithLabelValues(t).Add(float64(n))
	}
	p, err := s.assemble(snap, md, params.MaxSeqLen)
	if err != nil {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprintln(w, err.Error())
		return
	}
	if wantsJSON(r) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
		samples.WriteJSONLines(w, p, samples.LineInfo{SessionID: sess.id, Counters: md.MismatchCounts, TokenText: func(id int) string {
			t, _ := s.opts.Codec.Tok.Decode([]int{id}, false)
			return t
		}})
		return
	}
	data, err := samples.EncodeSafetensors(p)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	w.Write(data)
}

func wantsJSON(r *http.Request) bool {
	for _, a := range strings.Split(r.Header.Get("Accept"), ",") {
		mt := strings.TrimSpace(strings.SplitN(a, ";", 2)[0])
		if mt == "application/json" || mt == "application/x-ndjson" || mt == "application/jsonl" {
			return true
		}
	}
	return false
}

// assemble builds the payload: per-turn samples, truncated, merged.
func (s *Server) assemble(snap snapshot, md Metadata, maxSeqLen *int) (*samples.Payload, error) {
	p := &samples.Payload{SessionMetadata: mustJSON(md)}
	recs := snap.traj.Records()
	if len(recs) == 0 {
		p.EmptyReason = samples.NoRecords
		return p, nil
	}
	turns := make([]samples.Turn, len(recs))
	for i, rec := range recs {
		turns[i] = samples.Turn{PromptIDs: rec.PromptIDs, OutputIDs: rec.OutputIDs, LogProbs: rec.LogProbs, FinishReason: rec.FinishReason,
			PromptTokens: rec.Meta.PromptTokens, CachedTokens: rec.Meta.CachedTokens, WeightVersion: rec.Meta.WeightVersion,
			E2ELatency: rec.Meta.E2ELatency, Timestamp: rec.Timestamp, RequestTimestamp: rec.RequestTimestamp}
	}
	decode := func(ids []int) string {
		t, _ := s.opts.Codec.Tok.Decode(ids, false)
		return t
	}
	ss, err := samples.FromTurns(turns, snap.traj.Tokens(), s.opts.Codec.MaxTrimTokens(), decode)
	if err != nil {
		return nil, err
	}
	if maxSeqLen != nil {
		ss = samples.Truncate(ss, *maxSeqLen, decode)
	}
	if len(ss) == 0 {
		p.EmptyReason = samples.AllTruncated
		return p, nil
	}
	merged, err := samples.Merge(ss, decode)
	if err != nil {
		return nil, err
	}
	p.Samples = []samples.Sample{merged}
	return p, nil
}

// proxy relays any other request under a session to the engine.
func (s *Server) proxy(w http.ResponseWriter, r *http.Request) {
	// The path below the session as escaped on the wire, not PathValue's
	// decoding of it: the engine judges what the client really sent, and
	// a path that could leave its base is refused before the body is read.
	_, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.EscapedPath(), "/sessions/"), "/")
	if _, err := engine.RelayPath(rest); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	sess, body, release, ok := s.sessionBody(w, r)
	if !ok {
		return
	}
	defer release()
	c, err := s.opts.Engine.Forward(r.Context(), r.Method, rest, r.URL.RawQuery, r.Header, body, sess.id)
	if err != nil {
		status := http.StatusInternalServerError
		switch {
		case errors.Is(err, engine.ErrUpstream):
			status = http.StatusBadGateway
		case errors.Is(err, engine.ErrBadPath):
			status = http.StatusBadRequest
		}
		writeError(w, status, err.Error())
		return
	}
	passThrough(w, c)
}
