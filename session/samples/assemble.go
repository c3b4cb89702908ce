package samples

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
)

// Status is a sample's outcome, with Miles's wire values.
type Status string

// The statuses.
const (
	Pending   Status = "pending"
	Completed Status = "completed"
	Truncated Status = "truncated"
	Aborted   Status = "aborted"
)

// StatusOf maps an OpenAI finish_reason to a status.
func StatusOf(finishReason string) Status {
	switch finishReason {
	case "stop", "tool_calls":
		return Completed
	case "length":
		return Truncated
	case "abort":
		return Aborted
	}
	return Pending
}

// ErrAssembly marks recorded turns that do not assemble into samples
// (HTTP 422 from the server).
var ErrAssembly = errors.New("samples do not assemble")

// Turn is one recorded engine call.
type Turn struct {
	PromptIDs, OutputIDs []int
	LogProbs             []float64
	FinishReason         string
	PromptTokens         int
	CachedTokens         int
	WeightVersion        string
	E2ELatency           *float64
	// Timestamp is when the turn was recorded, RequestTimestamp when its
	// request arrived (Unix seconds).
	Timestamp, RequestTimestamp float64
}

// PrefixCacheInfo sums the engine's prompt-cache counters.
type PrefixCacheInfo struct {
	CachedTokens      int `json:"cached_tokens"`
	TotalPromptTokens int `json:"total_prompt_tokens"`
}

// Sample is one training sample.
type Sample struct {
	Tokens          []int
	LossMask        []uint8   // one per response token
	RolloutLogProbs []float64 // one per response token
	Response        string
	ResponseLength  int
	Status          Status
	WeightVersions  []string
	PrefixCacheInfo PrefixCacheInfo
	Metadata        map[string]any
	// Reward is the sample's reward on Miles's v2 wire (a number or an
	// object; nil is null: the trainer's own reward stands).
	Reward any
	// TurnStarts are the token positions where each turn begins (its
	// prompt, then each observation); JSON lines carry them.
	TurnStarts []int
}

// Decoder turns ids into text (for the response strings).
type Decoder func(ids []int) string

// FromTurns builds a sample per turn, aligning outputs with accumulated.
func FromTurns(turns []Turn, accumulated []int, maxTrim int, decode Decoder) ([]Sample, error) {
	out := make([]Sample, 0, len(turns))
	cursor := 0
	for i, t := range turns {
		if len(t.LogProbs) != len(t.OutputIDs) {
			return nil, fmt.Errorf("%w: turn %d has %d logprobs for %d output tokens", ErrAssembly, i+1, len(t.LogProbs), len(t.OutputIDs))
		}
		last := i == len(turns)-1
		cursor = len(t.PromptIDs)
		matched := 0
		for j, id := range t.OutputIDs {
			if cursor+j >= len(accumulated) || accumulated[cursor+j] != id {
				break
			}
			matched++
		}
		trim := len(t.OutputIDs) - matched
		allowed := maxTrim
		if last {
			allowed = 0
		}
		if trim > allowed {
			return nil, fmt.Errorf("%w: turn %d: %d trailing output tokens are not in the accumulated ids (allowed %d)", ErrAssembly, i+1, trim, allowed)
		}
		cursor += matched
		s := Sample{
			Tokens:          append(append(make([]int, 0, len(t.PromptIDs)+len(t.OutputIDs)), t.PromptIDs...), t.OutputIDs...),
			RolloutLogProbs: append([]float64(nil), t.LogProbs...),
			ResponseLength:  len(t.OutputIDs),
			LossMask:        ones(len(t.OutputIDs)),
			Response:        decode(t.OutputIDs),
			Status:          StatusOf(t.FinishReason),
			PrefixCacheInfo: PrefixCacheInfo{CachedTokens: t.CachedTokens, TotalPromptTokens: t.PromptTokens},
			Metadata:        map[string]any{"lifecycle": lifecycle(turns, i)},
			TurnStarts:      []int{0},
		}
		if t.WeightVersion != "" {
			s.WeightVersions = []string{t.WeightVersion}
		}
		s.stripLast(trim, decode)
		out = append(out, s)
	}
	if cursor != len(accumulated) {
		return nil, fmt.Errorf("%w: the turns cover %d of %d accumulated tokens", ErrAssembly, cursor, len(accumulated))
	}
	return out, nil
}

// lifecycle is a turn's timing segment: t0 (start, when the engine
// reports its latency), t1 (end), its number, and the gaps around it.
func lifecycle(turns []Turn, i int) map[string]any {
	t := turns[i]
	seg := map[string]any{"t1": t.Timestamp, "turn": i + 1, "t0": nil}
	if t.E2ELatency != nil {
		seg["t0"] = t.Timestamp - *t.E2ELatency
	}
	if t.RequestTimestamp != 0 {
		seg["req_ts"] = t.RequestTimestamp
	}
	if i > 0 {
		seg["prev_t1"] = turns[i-1].Timestamp
	}
	return seg
}

func ones(n int) []uint8 {
	m := make([]uint8, n)
	for i := range m {
		m[i] = 1
	}
	return m
}

// stripLast removes the last n output tokens and what goes with them.
func (s *Sample) stripLast(n int, decode Decoder) {
	if n <= 0 {
		return
	}
	n = min(n, s.ResponseLength)
	s.Tokens = s.Tokens[:len(s.Tokens)-n]
	s.ResponseLength -= n
	s.RolloutLogProbs = s.RolloutLogProbs[:len(s.RolloutLogProbs)-n]
	s.LossMask = s.LossMask[:len(s.LossMask)-n]
	s.Response = ""
	if s.ResponseLength > 0 {
		s.Response = decode(s.Tokens[len(s.Tokens)-s.ResponseLength:])
	}
}

// Truncate keeps whole turns while they fit in maxSeqLen tokens; the turn
// that overflows is cut (TRUNCATED) if some of its output still fits, and
// everything after it is dropped.
func Truncate(ss []Sample, maxSeqLen int, decode Decoder) []Sample {
	var out []Sample
	for _, s := range ss {
		if len(s.Tokens) <= maxSeqLen {
			out = append(out, s)
			continue
		}
		over := len(s.Tokens) - maxSeqLen
		if s.ResponseLength-over <= 0 {
			break
		}
		s.stripLast(over, decode)
		s.Status = Truncated
		out = append(out, s)
		break
	}
	return out
}

// Merge joins per-turn samples into one: each turn's tokens must extend
// the previous turn's, and the observation span between them gets loss
// mask 0 and logprob 0. Merging stops at the first turn that did not
// complete.
func Merge(ss []Sample, decode Decoder) (Sample, error) {
	if len(ss) == 0 {
		return Sample{}, fmt.Errorf("%w: nothing to merge", ErrAssembly)
	}
	acc := ss[0]
	for i, b := range ss[1:] {
		if acc.Status != Completed {
			break
		}
		var err error
		if acc, err = mergePair(acc, b, decode); err != nil {
			return Sample{}, fmt.Errorf("turn %d: %w", i+2, err)
		}
	}
	return acc, nil
}

func mergePair(a, b Sample, decode Decoder) (Sample, error) {
	obs := len(b.Tokens) - len(a.Tokens) - b.ResponseLength
	if len(b.Tokens) < len(a.Tokens) || !slices.Equal(b.Tokens[:len(a.Tokens)], a.Tokens) {
		return Sample{}, fmt.Errorf("%w: a turn's tokens do not start with the previous turn's", ErrAssembly)
	}
	if obs <= 0 {
		return Sample{}, fmt.Errorf("%w: empty observation span between turns (%d)", ErrAssembly, obs)
	}
	aMeta, aLife := splitLifecycle(a.Metadata)
	bMeta, bLife := splitLifecycle(b.Metadata)
	if !reflect.DeepEqual(aMeta, bMeta) {
		return Sample{}, fmt.Errorf("%w: turn metadata differs", ErrAssembly)
	}
	meta := map[string]any{}
	for k, v := range aMeta {
		meta[k] = v
	}
	if life := append(aLife, bLife...); len(life) > 0 {
		meta["lifecycle"] = life
	}
	zeros := make([]float64, obs)
	return Sample{
		Tokens:          b.Tokens,
		Response:        a.Response + decode(b.Tokens[len(a.Tokens):len(a.Tokens)+obs]) + b.Response,
		ResponseLength:  a.ResponseLength + obs + b.ResponseLength,
		LossMask:        append(append(append([]uint8(nil), a.LossMask...), make([]uint8, obs)...), b.LossMask...),
		RolloutLogProbs: append(append(append([]float64(nil), a.RolloutLogProbs...), zeros...), b.RolloutLogProbs...),
		WeightVersions:  append(append([]string(nil), a.WeightVersions...), b.WeightVersions...),
		Status:          b.Status,
		PrefixCacheInfo: PrefixCacheInfo{
			CachedTokens:      a.PrefixCacheInfo.CachedTokens + b.PrefixCacheInfo.CachedTokens,
			TotalPromptTokens: a.PrefixCacheInfo.TotalPromptTokens + b.PrefixCacheInfo.TotalPromptTokens,
		},
		Metadata:   meta,
		TurnStarts: append(append([]int(nil), a.TurnStarts...), len(a.Tokens)),
	}, nil
}

func splitLifecycle(m map[string]any) (map[string]any, []any) {
	rest := map[string]any{}
	var life []any
	for k, v := range m {
		if k != "lifecycle" {
			rest[k] = v
			continue
		}
		if l, ok := v.([]any); ok {
			life = l
		} else {
			life = []any{v}
		}
	}
	return rest, life
}
