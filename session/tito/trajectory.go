package tito

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// MaxRollback is how many generated assistant turns a retry may discard.
const MaxRollback = 1

// appendRoles are the roles a request may append after stored history.
var appendRoles = map[string]bool{"tool": true, "user": true, "system": true, "assistant": true}

// TurnMeta is what an engine reports about a turn besides its tokens.
type TurnMeta struct {
	PromptTokens  int      `json:"prompt_tokens"`
	CachedTokens  int      `json:"cached_tokens"`
	WeightVersion string   `json:"weight_version,omitempty"`
	E2ELatency    *float64 `json:"e2e_latency,omitempty"`
}

// Record is one committed turn.
type Record struct {
	Timestamp        float64
	RequestTimestamp float64
	Method, Path     string
	StatusCode       int
	// Request is the body sent upstream, without input_ids (PromptIDs).
	Request  map[string]json.RawMessage
	Response json.RawMessage
	// PromptIDs, OutputIDs and LogProbs are the turn's tokens.
	PromptIDs    []int
	OutputIDs    []int
	LogProbs     []float64
	FinishReason string
	Meta         TurnMeta
	// Retokenized marks output ids that came from this server's tokenizer
	// because the engine returned text only.
	Retokenized bool
	// Tools and Kwargs are what the turn rendered with.
	Tools  Tools
	Kwargs Kwargs
}

// Trajectory is one session's linear history. It is not safe for
// concurrent use.
type Trajectory struct {
	// MaxTokens, when above 0, bounds the prompts Prepare returns: past
	// it Prepare stops tokenizing and refuses (ErrTooLong).
	MaxTokens int

	messages    []Message
	checkpoints [][]int // the accumulated ids after each generated turn
	ends        []int   // message count at each checkpoint
	records     []Record
	// alias holds, by index, a client's own spelling of a stored message
	// that matched it (under the matcher noted), so that the same bytes
	// need no parse next turn.
	alias map[int]aliasEntry
}

type aliasEntry struct {
	raw json.RawMessage
	m   Matcher
}

// Tokens is the accumulated ids at the latest checkpoint (shared: do not
// modify).
func (t *Trajectory) Tokens() []int {
	if len(t.checkpoints) == 0 {
		return nil
	}
	return t.checkpoints[len(t.checkpoints)-1]
}

// Messages is the stored history (shared: do not modify).
func (t *Trajectory) Messages() []Message { return t.messages }

// Records are the committed turns (shared: do not modify).
func (t *Trajectory) Records() []Record { return t.records }

// NumAssistant is the number of generated turns.
func (t *Trajectory) NumAssistant() int { return len(t.ends) }

// ParseRequest parses a request's messages, reusing the stored message at
// the same index when the JSON is byte for byte the stored one (clients
// resend their history verbatim, so only new messages cost a parse).
func (t *Trajectory) ParseRequest(raws []json.RawMessage, m Matcher) ([]Message, error) {
	return parseMessages(raws, t.messages, func(i int, raw json.RawMessage) bool {
		a, ok := t.alias[i]
		return ok && a.m == m && bytes.Equal(raw, a.raw)
	})
}

// parseMessages parses raws, taking stored[i] for a raw that is its JSON
// or that alias(i, raw) says spells it.
func parseMessages(raws []json.RawMessage, stored []Message, alias func(int, json.RawMessage) bool) ([]Message, error) {
	out := make([]Message, len(raws))
	for i, raw := range raws {
		if i < len(stored) && (bytes.Equal(raw, stored[i].Raw) || alias(i, raw)) {
			out[i] = stored[i]
			continue
		}
		m, err := ParseMessage(raw)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		out[i] = m
	}
	return out, nil
}

// Prepare returns the prompt ids for a request's messages: after rolling
// back at most one generated turn on a retry, the stored ids joined with
// the increment of the appended messages; the full rendering when nothing
// is stored.
func (t *Trajectory) Prepare(c *Codec, req []Message, tools Tools, kw Kwargs, m Matcher) ([]int, error) {
	if len(req) == 0 {
		return nil, invalidf("messages must not be empty")
	}
	if err := t.rollback(req, m); err != nil {
		return nil, err
	}
	if len(t.Tokens()) == 0 {
		return limit(t.MaxTokens).check(c.renderIDs(req, tools, true, kw, t.MaxTokens))
	}
	if len(req) < len(t.messages) {
		return nil, invalidf("the request has %d messages, fewer than the %d stored", len(req), len(t.messages))
	}
	for i, s := range t.messages {
		if !m.Match(s, req[i]) {
			return nil, invalidf("message %d (role %s) differs from the stored one (role %s)", i, req[i].Role, s.Role)
		}
		if !bytes.Equal(req[i].Raw, s.Raw) {
			if t.alias == nil {
				t.alias = map[int]aliasEntry{}
			}
			t.alias[i] = aliasEntry{raw: req[i].Raw, m: m}
		}
	}
	if err := extendable(t.records[len(t.records)-1].FinishReason, false); err != nil {
		return nil, err
	}
	return extend(c, t.Tokens(), t.messages, req[len(t.messages):], tools, kw, limit(t.MaxTokens))
}

// extend is the prompt of the appended messages after stored ids (the
// rendering of the stored messages): the ids of their increment, joined
// across the family's boundary, within max.
func extend(c *Codec, ids []int, stored, appended []Message, tools Tools, kw Kwargs, max limit) ([]int, error) {
	for j, a := range appended {
		if !appendRoles[a.Role] {
			return nil, invalidf("appended message %d has role %q; allowed: tool, user, system, assistant", len(stored)+j, a.Role)
		}
	}
	room := 0
	if max > 0 {
		// Join may drop the last stored id; a longer join is refused below.
		if room = int(max) - len(ids) + 1; room <= 0 {
			return max.check(nil, ErrTooLong)
		}
	}
	inc, err := c.Increment(stored[len(stored)-1], appended, tools, kw, room)
	if err != nil {
		return max.check(nil, err)
	}
	return max.check(c.Join(ids, inc), nil)
}

// limit is a session's bound on a prompt's ids (none when 0).
type limit int

// check refuses a prompt over the limit, saying what the limit is.
func (l limit) check(prompt []int, err error) ([]int, error) {
	switch {
	case errors.Is(err, ErrTooLong):
		return nil, fmt.Errorf("%w: the prompt has more than %d, the session's limit", ErrTooLong, l)
	case err != nil:
		return nil, err
	case l > 0 && len(prompt) > int(l):
		return nil, fmt.Errorf("%w: the prompt has %d, more than the session's limit %d", ErrTooLong, len(prompt), l)
	}
	return prompt, nil
}

// ErrCutShort marks a request that would extend a generation the engine
// cut short (HTTP 409, Miles's TruncatedGenerationError): in a tree, one
// that ended at max_tokens (finish_reason "length"), which closes its path
// for good (radixark/miles miles/rollout/session/v2/session_state.py
// position_for_request, at 31f1ca961a94cb860cec3b2dea34ec332bfa8f76); in
// either version, one the engine aborted (finish_reason "abort"): going on
// from a partial generation is a partial rollout, which Miles refuses with
// a session server (miles/utils/arguments.py: --use-session-server with
// --pause-generation-mode=abort is an assertion error, v2 with
// --partial-rollout a ValueError, both at startup; docs/user-guide/
// agentic-rollout.md: "Both versions reject --pause-generation-mode=abort
// and --partial-rollout"). berth has neither knob, so the request that
// would continue the partial generation is what it refuses. A retry of the
// turn (history that diverges in it) is not an extension.
var ErrCutShort = errors.New("the generation was cut short")

// extendable refuses to extend a turn that ended with finishReason: an
// aborted one always, a length cut in a tree.
func extendable(finishReason string, tree bool) error {
	switch {
	case finishReason == "abort":
		return fmt.Errorf("%w: the turn it extends was aborted by the engine (finish_reason 'abort'); a partial generation cannot be continued (Miles refuses partial rollouts with a session server): retry the turn instead", ErrCutShort)
	case finishReason == "length" && tree:
		return fmt.Errorf("%w: truncated generation cannot be extended: the matched turn ended with finish_reason 'length' and truncation closes that path for good; branch before the cut instead", ErrCutShort)
	}
	return nil
}

// rollback detects a request that diverges inside the stored history and
// truncates to the last generated checkpoint within the matched prefix.
func (t *Trajectory) rollback(req []Message, m Matcher) error {
	if len(t.messages) == 0 || len(t.checkpoints) == 0 {
		return nil
	}
	match := 0
	for i := 0; i < len(req) && i < len(t.messages); i++ {
		if !m.Match(t.messages[i], req[i]) {
			break
		}
		match = i + 1
	}
	if match >= len(t.messages) {
		return nil
	}
	cp := -1
	for i := len(t.ends) - 1; i >= 0; i-- {
		if t.ends[i] <= match {
			cp = i
			break
		}
	}
	if discard := len(t.ends) - (cp + 1); discard > MaxRollback {
		return invalidf("the request rewrites history %d assistant turns back (at most %d may be retried): it matches %d of %d stored messages",
			discard, MaxRollback, match, len(t.messages))
	}
	end := 0
	if cp >= 0 {
		end = t.ends[cp]
	}
	t.messages = t.messages[:end:end]
	for i := range t.alias {
		if i >= end {
			delete(t.alias, i)
		}
	}
	t.checkpoints = t.checkpoints[: cp+1 : cp+1]
	t.ends = t.ends[: cp+1 : cp+1]
	t.records = t.records[: cp+1 : cp+1]
	return nil
}

// PrefixError is a broken prefix invariant: the stored ids are not a
// prefix of the new turn's prompt and completion.
type PrefixError struct {
	Stored, Checked, Trim, Got int
	// Position is the first index where the sequences differ.
	Position int
}

func (e *PrefixError) Error() string {
	return fmt.Sprintf("pretokenized prefix mismatch: stored %d tokens (checking the first %d, allowing %d trailing) are not a prefix of prompt+completion (%d tokens): first mismatch at index %d",
		e.Stored, e.Checked, e.Trim, e.Got, e.Position)
}

func (e *PrefixError) Unwrap() error { return ErrTokenization }

// CheckPrefix is the invariant prev[:len(prev)-trim] == next[:same].
func CheckPrefix(prev, next []int, trim int) error {
	n := len(prev) - trim
	if len(prev) == 0 || n <= 0 {
		return nil
	}
	for i := 0; i < n; i++ {
		if i >= len(next) || next[i] != prev[i] {
			return &PrefixError{Stored: len(prev), Checked: n, Trim: trim, Got: len(next), Position: i}
		}
	}
	return nil
}

// Commit records a generated turn: it checks the prefix invariant, then
// stores the history (stored messages for the matched prefix, the
// request's for the rest, and the assistant message) and the ids.
func (t *Trajectory) Commit(req []Message, asst Message, rec Record, maxTrim int) error {
	all := make([]int, 0, len(rec.PromptIDs)+len(rec.OutputIDs))
	all = append(append(all, rec.PromptIDs...), rec.OutputIDs...)
	if err := CheckPrefix(t.Tokens(), all, maxTrim); err != nil {
		return err
	}
	msgs := make([]Message, 0, len(req)+1)
	msgs = append(msgs, t.messages...)
	if len(req) > len(t.messages) {
		msgs = append(msgs, req[len(t.messages):]...)
	}
	t.messages = append(msgs, asst)
	t.checkpoints = append(t.checkpoints, all)
	t.ends = append(t.ends, len(req)+1)
	t.records = append(t.records, rec)
	return nil
}
