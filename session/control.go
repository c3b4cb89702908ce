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
// and read without it (the trajectory's slices are never written in place;
// a tree's nodes never change once committed): for a tree session, its
// branch's current path, and the tree's tables.
type snapshot struct {
	traj  tito.Trajectory
	tree  *samples.Tree
	abort string // the abort reason, when aborted
}

func (s *Server) snapshot(sess *session) snapshot {
	sess.mu.Lock()
	if sess.tree != nil {
		active, tbl := sess.branch.Active, treeTable(sess.tree)
		sess.mu.Unlock()
		return snapshot{traj: active.Linear(), tree: &tbl, abort: sess.ab.reasonOf()}
	}
	defer sess.mu.Unlock()
	return snapshot{traj: sess.traj, abort: sess.ab.reasonOf()}
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
	// AbortReason is set once the session is aborted.
	AbortReason string `json:"abort_reason,omitempty"`
	// Tree is a v2 session's tree (the other fields are of the path its
	// handle is on); Agent is the samples request's metadata, in what
	// that request returns.
	Tree  *samples.Tree  `json:"tree,omitempty"`
	Agent map[string]any `json:"agent,omitempty"`
}

// Info is the body of GET /sessions/{id}.
type Info struct {
	SessionID string   `json:"session_id"`
	Records   []Record `json:"records"`
	Metadata  Metadata `json:"metadata"`
}

func (s *Server) metadata(snap snapshot) Metadata {
	md := Metadata{AccumulatedTokenIDs: snap.traj.Tokens(), MaxTrimTokens: s.opts.Codec.MaxTrimTokens(), AbortReason: snap.abort, Tree: snap.tree}
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
	if sess.tree != nil {
		s.treeSamples(w, r, sess, body)
		return
	}
	var params samplesParams
	if !readSamplesBody(w, body, &params, &params) {
		return
	}
	snap := s.snapshot(sess)
	md, ok := s.checked(w, r, snap)
	if !ok {
		return
	}
	p, err := s.assemble(snap, md, params.MaxSeqLen)
	if err != nil {
		writeAssembly(w, err)
		return
	}
	for i := range p.Samples {
		markAborted(&p.Samples[i], snap.abort)
	}
	s.writePayload(w, r, sess, p, md)
}

// samplesParams are the samples body's fields of both versions.
type samplesParams struct {
	MaxSeqLen *int `json:"max_seq_len"`
}

// readSamplesBody parses a samples body (empty is {}) into params, whose
// common fields are c; it writes the error itself.
func readSamplesBody(w http.ResponseWriter, body []byte, params any, c *samplesParams) bool {
	if len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, params); err != nil {
			writeError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
			return false
		}
	}
	if c.MaxSeqLen != nil && *c.MaxSeqLen <= 0 {
		writeError(w, http.StatusBadRequest, "max_seq_len must be positive")
		return false
	}
	return true
}

// writeAssembly answers turns that do not assemble: 422 with the text.
func writeAssembly(w http.ResponseWriter, err error) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusUnprocessableEntity)
	fmt.Fprintln(w, err.Error())
}

// markAborted makes a sample of an aborted session ABORTED, the reason in
// its metadata's abort_reason.
func markAborted(smp *samples.Sample, reason string) {
	if reason == "" {
		return
	}
	smp.Status = samples.Aborted
	if smp.Metadata == nil {
		smp.Metadata = map[string]any{}
	}
	smp.Metadata["abort_reason"] = reason
}

// writePayload answers the samples route: safetensors, or JSON lines when
// the client accepts them; md's counts feed the metrics.
func (s *Server) writePayload(w http.ResponseWriter, r *http.Request, sess *session, p *samples.Payload, md Metadata) {
	s.metrics.checked.Inc()
	for t, n := range md.MismatchCounts {
		s.metrics.mismatches.WithLabelValues(t).Add(float64(n))
	}
	if wantsJSON(r) {
		info := samples.LineInfo{SessionID: sess.id, Counters: md.MismatchCounts, TokenText: func(id int) string {
			t, _ := s.opts.Codec.Tok.Decode([]int{id}, false)
			return t
		}}
		if p.V2 {
			p, info.Counters = leafCounters(p), nil
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
		samples.WriteJSONLines(w, p, info)
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

// leafCounters is a tree's payload with each leaf's own mismatch counts
// where JSON lines readers (berth view) look: metadata.tito_mismatch.
func leafCounters(p *samples.Payload) *samples.Payload {
	out := *p
	out.Samples = make([]samples.Sample, len(p.Samples))
	for i, smp := range p.Samples {
		md := make(map[string]any, len(smp.Metadata)+1)
		for k, v := range smp.Metadata {
			md[k] = v
		}
		md["tito_mismatch"] = smp.Metadata["mismatch_counts"]
		smp.Metadata = md
		out.Samples[i] = smp
	}
	return &out
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

// assemble builds a linear session's payload: its turns' samples,
// truncated, merged into one.
func (s *Server) assemble(snap snapshot, md Metadata, maxSeqLen *int) (*samples.Payload, error) {
	p := &samples.Payload{SessionMetadata: mustJSON(md)}
	if len(snap.traj.Records()) == 0 {
		p.EmptyReason = samples.NoRecords
		return p, nil
	}
	merged, ok, err := s.merge(&snap.traj, maxSeqLen)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		p.EmptyReason = samples.AllTruncated
	default:
		p.Samples = []samples.Sample{merged}
	}
	return p, nil
}

// merge assembles a trajectory's turns into one sample (false: they all
// truncated away, or there are none).
func (s *Server) merge(traj *tito.Trajectory, maxSeqLen *int) (samples.Sample, bool, error) {
	recs := traj.Records()
	turns := make([]samples.Turn, len(recs))
	for i, rec := range recs {
		turns[i] = samples.Turn{PromptIDs: rec.PromptIDs, OutputIDs: rec.OutputIDs, LogProbs: rec.LogProbs, FinishReason: rec.FinishReason,
			PromptTokens: rec.Meta.PromptTokens, CachedTokens: rec.Meta.CachedTokens, WeightVersion: rec.Meta.WeightVersion,
			E2ELatency: rec.Meta.E2ELatency, Timestamp: rec.Timestamp, RequestTimestamp: rec.RequestTimestamp}
	}
	ss, err := samples.FromTurns(turns, traj.Tokens(), s.opts.Codec.MaxTrimTokens(), s.decode)
	if err != nil {
		return samples.Sample{}, false, err
	}
	if maxSeqLen != nil {
		ss = samples.Truncate(ss, *maxSeqLen, s.decode)
	}
	if len(ss) == 0 {
		return samples.Sample{}, false, nil
	}
	merged, err := samples.Merge(ss, s.decode)
	return merged, err == nil, err
}

func (s *Server) decode(ids []int) string {
	t, _ := s.opts.Codec.Tok.Decode(ids, false)
	return t
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
