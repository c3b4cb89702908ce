package tito

import (
	"strconv"
	"strings"
)

// Mismatch types. The first three must be 0 for a trainer's strict gate;
// assistant_text is expected (assistant ids come from the model, not from
// the template).
const (
	SpecialTokenCount = "special_token_count"
	SpecialTokenType  = "special_token_type"
	NonAssistantText  = "non_assistant_text"
	AssistantText     = "assistant_text"
)

// MismatchTypes are all types, gated ones first.
var MismatchTypes = []string{SpecialTokenCount, SpecialTokenType, NonAssistantText, AssistantText}

// Mismatch is one difference between the accumulated ids and a fresh
// rendering of the transcript.
type Mismatch struct {
	Type         string `json:"type"`
	SegmentIndex int    `json:"segment_index"`
	ExpectedText string `json:"expected_text"`
	ActualText   string `json:"actual_text"`
	Detail       string `json:"detail"`
}

type segment struct {
	ids     []int
	special bool
}

func (c *Codec) segments(ids []int) []segment {
	var out []segment
	var cur []int
	for _, id := range ids {
		if c.Tok.IsSpecial(id) {
			if len(cur) > 0 {
				out = append(out, segment{ids: cur})
				cur = nil
			}
			out = append(out, segment{ids: []int{id}, special: true})
			continue
		}
		cur = append(cur, id)
	}
	if len(cur) > 0 {
		out = append(out, segment{ids: cur})
	}
	return out
}

func (c *Codec) decode(ids []int) string {
	s, err := c.Tok.Decode(ids, false)
	if err != nil {
		return "<undecodable>"
	}
	return s
}

func (c *Codec) trimTrailing(ids []int) []int {
	for len(ids) > 0 && c.trailing[ids[len(ids)-1]] {
		ids = ids[:len(ids)-1]
	}
	return ids
}

// Compare splits both sequences at special tokens and compares them
// segment by segment (after dropping the family's trailing tokens).
func (c *Codec) Compare(expected, actual []int) []Mismatch {
	exp, act := c.segments(c.trimTrailing(expected)), c.segments(c.trimTrailing(actual))
	structure := func(segs []segment) string {
		var b strings.Builder
		for i, s := range segs {
			if i > 0 {
				b.WriteByte(' ')
			}
			if s.special {
				b.WriteString("[" + c.decode(s.ids) + "]")
			} else {
				b.WriteString("(" + strconv.Itoa(len(s.ids)) + " tokens)")
			}
		}
		return b.String()
	}
	if len(exp) != len(act) {
		return []Mismatch{{Type: SpecialTokenCount, SegmentIndex: -1, ExpectedText: structure(exp), ActualText: structure(act),
			Detail: "segment count differs: expected " + strconv.Itoa(len(exp)) + ", got " + strconv.Itoa(len(act))}}
	}
	for i := range exp {
		if exp[i].special != act[i].special {
			return []Mismatch{{Type: SpecialTokenCount, SegmentIndex: -1, ExpectedText: structure(exp), ActualText: structure(act),
				Detail: "segment structure (special/content pattern) differs"}}
		}
	}
	var out []Mismatch
	for i := range exp {
		e, a := exp[i], act[i]
		if e.special {
			if e.ids[0] != a.ids[0] {
				out = append(out, Mismatch{Type: SpecialTokenType, SegmentIndex: i, ExpectedText: c.decode(e.ids), ActualText: c.decode(a.ids)})
			}
			continue
		}
		et, at := c.decode(e.ids), c.decode(a.ids)
		if et == at {
			continue
		}
		typ := NonAssistantText
		if c.isAssistant(exp, i) && c.isAssistant(act, i) {
			typ = AssistantText
		}
		out = append(out, Mismatch{Type: typ, SegmentIndex: i, ExpectedText: et, ActualText: at})
	}
	return out
}

// isAssistant: the segment follows a special token and, read together with
// it, starts like an assistant turn.
func (c *Codec) isAssistant(segs []segment, i int) bool {
	if c.assistantStart == "" || i == 0 || segs[i].special || !segs[i-1].special {
		return false
	}
	head := segs[i].ids
	if len(head) > 20 {
		head = head[:20]
	}
	return strings.HasPrefix(c.decode(segs[i-1].ids)+c.decode(head), c.assistantStart)
}

// Counts tallies mismatches by type (every type present, zero or not).
func Counts(ms []Mismatch) map[string]int {
	out := make(map[string]int, len(MismatchTypes))
	for _, t := range MismatchTypes {
		out[t] = 0
	}
	for _, m := range ms {
		out[m.Type]++
	}
	return out
}

// SessionMismatch compares a trajectory's accumulated ids, joined at the
// family's boundary as the next turn would be, with a fresh rendering of
// its transcript (the tools and kwargs of its last turn). It returns nil
// when nothing is stored.
func (c *Codec) SessionMismatch(t *Trajectory) ([]Mismatch, error) {
	if len(t.Tokens()) == 0 {
		return nil, nil
	}
	var tools = t.records[len(t.records)-1].Tools
	kw := t.records[len(t.records)-1].Kwargs
	expected, err := c.RenderIDs(t.messages, tools, false, kw)
	if err != nil {
		return nil, err
	}
	// The ids as the next turn would go on from them: a last turn cut
	// without its end-of-turn token is closed as Join closes it, so that
	// a cut is not counted as a special-token difference.
	return append([]Mismatch{}, c.Compare(expected, c.Join(t.Tokens(), nil))...), nil
}
