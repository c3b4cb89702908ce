package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/berth-sh/berth/session/engine"
	"github.com/berth-sh/berth/session/tito"
)

// turnRequest is a parsed chat request.
type turnRequest struct {
	fields    map[string]json.RawMessage // forwarded upstream
	stream    bool
	raw       []json.RawMessage
	messages  []tito.Message
	tools     tito.Tools
	kwargs    tito.Kwargs
	anthropic bool
}

func (s *Server) parseTurn(fields map[string]json.RawMessage) (*turnRequest, error) {
	t := &turnRequest{fields: fields}
	t.stream = string(bytes.TrimSpace(fields["stream"])) == "true"
	delete(fields, "stream")
	delete(fields, "stream_options")
	delete(fields, "input_ids")
	var raw []json.RawMessage
	if err := json.Unmarshal(fields["messages"], &raw); err != nil {
		return nil, fmt.Errorf("%w: messages must be an array", tito.ErrInvalid)
	}
	if len(raw) > s.opts.MaxMessages {
		return nil, fmt.Errorf("%w: %d messages, more than %d", tito.ErrInvalid, len(raw), s.opts.MaxMessages)
	}
	t.raw = raw // parsed under the session's lock, against its history
	var err error
	if t.tools, err = tito.ParseTools(fields["tools"]); err != nil {
		return nil, err
	}
	if t.kwargs, err = s.opts.Codec.MergeKwargs(fields["chat_template_kwargs"]); err != nil {
		return nil, err
	}
	delete(fields, "chat_template_kwargs")
	if t.kwargs.JSON != nil {
		fields["chat_template_kwargs"], _ = json.Marshal(t.kwargs.JSON)
	}
	return t, nil
}

// errGone is a session deleted before its turn was prepared (404).
var errGone = errors.New("session not found")

func gone(id string) error { return fmt.Errorf("%w: session_id=%s", errGone, id) }

// position is where a prepared turn commits: for a linear session, the
// number of generated turns it expects to find; for a tree, the node it
// attached at.
type position struct {
	expected int
	parent   *tito.Node
}

// prepare parses a turn's body and prepares its prompt ids under the
// session's lock.
func (s *Server) prepare(sess *session, body []byte, anthropic bool) (t *turnRequest, prompt []int, pos position, err error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return nil, nil, pos, fmt.Errorf("%w: invalid JSON body", tito.ErrInvalid)
	}
	matcher := s.opts.Matcher
	if anthropic {
		matcher = matcher.AtLeast(tito.LooseToolCall) // our own conversion re-serializes tool arguments
		if fields, err = fromAnthropic(fields); err != nil {
			return nil, nil, pos, err
		}
	}
	if t, err = s.parseTurn(fields); err != nil {
		return nil, nil, pos, err
	}
	t.anthropic = anthropic
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.closing.Load() {
		return nil, nil, pos, gone(sess.id)
	}
	if sess.tree != nil {
		if t.messages, err = sess.tree.ParseRequest(sess.branch, t.raw); err == nil {
			pos.parent, prompt, err = sess.tree.Prepare(s.opts.Codec, sess.branch, t.messages, t.tools, t.kwargs, matcher)
		}
		return t, prompt, pos, err
	}
	before := sess.traj.NumAssistant()
	if t.messages, err = sess.traj.ParseRequest(t.raw, matcher); err == nil {
		prompt, err = sess.traj.Prepare(s.opts.Codec, t.messages, t.tools, t.kwargs, matcher)
	}
	if pos.expected = sess.traj.NumAssistant(); pos.expected < before {
		s.metrics.rollbacks.Inc()
	}
	return t, prompt, pos, err
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request, anthropic bool) {
	start := time.Now()
	sess, body, release, ok := s.sessionBody(w, r)
	if !ok {
		return
	}
	defer release()
	// The turn's context ends when the client goes or the session is
	// aborted: the engine call is cancelled with it.
	ctx, endTurn, err := sess.ab.begin(r.Context())
	if err != nil {
		s.refuse(w, err)
		return
	}
	defer endTurn()
	var t *turnRequest
	var prompt []int
	var pos position
	if werr := s.bounds.tokenize(ctx, int64(len(body)), func() { t, prompt, pos, err = s.prepare(sess, body, anthropic) }); werr != nil {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "gave up waiting to tokenize: "+werr.Error())
		return
	}
	s.metrics.prepare.Observe(time.Since(start).Seconds())
	if err != nil {
		s.refuse(w, err)
		return
	}

	// The engine call, without the lock.
	up := time.Now()
	comp, err := s.opts.Engine.Chat(ctx, &engine.Request{Body: t.fields, PromptIDs: prompt, RoutingKey: sess.id})
	s.metrics.upstream.Observe(time.Since(up).Seconds())
	if aerr := sess.ab.err(); aerr != nil {
		s.refuse(w, aerr) // cancelled by the abort, or answered after it: not recorded
		return
	}
	if err != nil {
		s.metrics.turns.WithLabelValues("upstream_error").Inc()
		writeError(w, http.StatusBadGateway, err.Error())
		return
	}
	if comp.Status != http.StatusOK {
		s.metrics.turns.WithLabelValues("passthrough").Inc()
		passThrough(w, comp)
		return
	}
	rec, asst, err := s.record(start, r, t, prompt, comp)
	if err == nil {
		err = s.commit(sess, t, pos, asst, rec, comp)
	}
	if err != nil {
		s.refuse(w, err)
		return
	}
	s.respond(w, t, comp)
}

// commit records a turn under the session's lock, unless the session was
// closed or aborted meanwhile (or, for a linear one, changed).
func (s *Server) commit(sess *session, t *turnRequest, pos position, asst tito.Message, rec tito.Record, comp *engine.Completion) error {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	var err error
	switch {
	case sess.ab.err() != nil:
		return sess.ab.err()
	case sess.closing.Load() || (sess.tree == nil && sess.traj.NumAssistant() != pos.expected):
		s.opts.Logger.Warn("session changed during the engine call; turn not recorded", "session", sess.id)
		s.metrics.turns.WithLabelValues("skipped").Inc()
		return nil
	case sess.tree != nil:
		_, err = sess.tree.Commit(sess.branch, pos.parent, t.messages, asst, rec, s.opts.Codec.MaxTrimTokens(), responseID(comp))
	default:
		err = sess.traj.Commit(t.messages, asst, rec, s.opts.Codec.MaxTrimTokens())
	}
	if err == nil {
		s.metrics.turns.WithLabelValues("committed").Inc()
	}
	return err
}

// responseID is the engine reply's id ("" when it has none).
func responseID(c *engine.Completion) string {
	var id string
	json.Unmarshal(c.Response["id"], &id)
	return id
}

// record builds the turn's record from the engine's reply.
func (s *Server) record(start time.Time, r *http.Request, t *turnRequest, prompt []int, comp *engine.Completion) (tito.Record, tito.Message, error) {
	asst, err := tito.ParseMessage(comp.Message)
	if err != nil || asst.Role != "assistant" {
		return tito.Record{}, tito.Message{}, fmt.Errorf("%w: the engine's message is not an assistant message", engine.ErrUpstream)
	}
	rec := tito.Record{
		RequestTimestamp: unixSeconds(start), Method: r.Method, Path: "/v1/chat/completions", StatusCode: comp.Status,
		Request: t.fields, Response: comp.Body, PromptIDs: prompt, OutputIDs: comp.OutputIDs, LogProbs: comp.LogProbs,
		FinishReason: comp.FinishReason, Meta: comp.Meta, Tools: t.tools, Kwargs: t.kwargs,
	}
	switch {
	case comp.TextOnly:
		if rec.OutputIDs, err = s.opts.Codec.AssistantIDs(asst, t.tools, t.kwargs); err != nil {
			return tito.Record{}, tito.Message{}, err
		}
		rec.LogProbs = make([]float64, len(rec.OutputIDs))
		rec.Retokenized = true
		s.metrics.retoken.Inc()
	case comp.PromptIDs != nil:
		if !slices.Equal(comp.PromptIDs, prompt) {
			s.metrics.enginePrompt.Inc()
		}
		rec.PromptIDs = comp.PromptIDs // what the model saw
	}
	rec.Timestamp = unixSeconds(time.Now())
	return rec, asst, nil
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// refuse writes a classed error: 400 invalid, 404 a session gone, 409 a
// generation cut short, 410 an aborted session, 500 tokenization (with the first differing
// position of a broken prefix), 502 upstream.
func (s *Server) refuse(w http.ResponseWriter, err error) {
	var pe *tito.PrefixError
	var ae *AbortedError
	switch {
	case errors.Is(err, errGone):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.As(err, &ae):
		s.metrics.turns.WithLabelValues("aborted").Inc()
		writeJSON(w, http.StatusGone, map[string]any{"error": err.Error(), "aborted": true, "abort_reason": ae.Reason})
	case errors.Is(err, tito.ErrCutShort):
		s.metrics.turns.WithLabelValues("refused").Inc()
		writeError(w, http.StatusConflict, err.Error())
	case errors.Is(err, tito.ErrInvalid):
		s.metrics.turns.WithLabelValues("refused").Inc()
		writeError(w, http.StatusBadRequest, err.Error())
	case errors.As(err, &pe):
		s.metrics.turns.WithLabelValues("tokenization_error").Inc()
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": err.Error(), "first_mismatch": pe.Position})
	case errors.Is(err, engine.ErrUpstream):
		s.metrics.turns.WithLabelValues("upstream_error").Inc()
		writeError(w, http.StatusBadGateway, err.Error())
	default:
		s.metrics.turns.WithLabelValues("tokenization_error").Inc()
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}

// passThrough relays an engine reply other than 200 as it came.
func passThrough(w http.ResponseWriter, c *engine.Completion) {
	if ct := c.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.WriteHeader(c.Status)
	w.Write(c.Body)
}

func (s *Server) respond(w http.ResponseWriter, t *turnRequest, comp *engine.Completion) {
	switch {
	case t.anthropic:
		msg, err := toAnthropic(comp)
		if err != nil {
			writeError(w, http.StatusBadGateway, err.Error())
			return
		}
		if t.stream {
			writeAnthropicSSE(w, msg)
			return
		}
		writeJSON(w, http.StatusOK, msg)
	case t.stream:
		writeChatSSE(w, comp)
	default:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write(comp.Body)
	}
}

func sseHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
}

// writeChatSSE is the fake stream: one chat.completion.chunk carrying the
// whole message (every tool call with its index), then [DONE].
func writeChatSSE(w http.ResponseWriter, comp *engine.Completion) {
	var msg map[string]json.RawMessage
	json.Unmarshal(comp.Message, &msg)
	delta := map[string]json.RawMessage{"role": json.RawMessage(`"assistant"`), "content": msg["content"]}
	if rc := msg["reasoning_content"]; len(rc) > 0 && string(rc) != "null" {
		delta["reasoning_content"] = rc
	}
	var calls []map[string]json.RawMessage
	if json.Unmarshal(msg["tool_calls"], &calls) == nil && len(calls) > 0 {
		for i, c := range calls {
			c["index"], _ = json.Marshal(i)
		}
		delta["tool_calls"], _ = json.Marshal(calls)
	}
	chunk := map[string]any{
		"id": comp.Response["id"], "object": "chat.completion.chunk", "created": comp.Response["created"], "model": comp.Response["model"],
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": comp.FinishReason}},
	}
	if u := comp.Response["usage"]; len(u) > 0 && string(u) != "null" {
		chunk["usage"] = u
	}
	data, _ := json.Marshal(chunk)
	sseHeaders(w)
	fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", data)
}
