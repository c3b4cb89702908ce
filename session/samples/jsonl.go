package samples

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
)

// LineInfo is what JSON lines carry besides the samples.
type LineInfo struct {
	SessionID string
	// TokenText, when set, gives each token's text (token_texts).
	TokenText func(id int) string
	// Counters are the session's mismatch counts, written into each
	// sample's metadata as tito_mismatch.
	Counters map[string]int
}

// jsonLine is a sample as one JSON line: the fields of the safetensors
// payload plus what a reader without a tokenizer needs (token_texts,
// turn_starts, the counters), with the status as COMPLETED, TRUNCATED or
// ABORTED. It is the samples.jsonl form berth view reads.
type jsonLine struct {
	Index           int             `json:"index"`
	SessionID       string          `json:"session_id,omitempty"`
	Tokens          []int           `json:"tokens"`
	TokenTexts      []string        `json:"token_texts,omitempty"`
	LossMask        []int           `json:"loss_mask"` // numbers: []uint8 would marshal as base64
	RolloutLogProbs []float64       `json:"rollout_log_probs"`
	ResponseLength  int             `json:"response_length"`
	TurnStarts      []int           `json:"turn_starts,omitempty"`
	Status          string          `json:"status"`
	Response        string          `json:"response"`
	WeightVersions  []string        `json:"weight_versions"`
	PrefixCacheInfo PrefixCacheInfo `json:"prefix_cache_info"`
	Metadata        map[string]any  `json:"metadata"`
	Reward          any             `json:"reward,omitempty"`
}

// emptyLine is the one line of a payload without samples.
type emptyLine struct {
	SessionID   string         `json:"session_id,omitempty"`
	EmptyReason string         `json:"empty_reason"`
	Metadata    map[string]any `json:"metadata"`
}

// WriteJSONLines writes one line per sample, or, without samples, one
// line with the empty reason.
func WriteJSONLines(w io.Writer, p *Payload, info LineInfo) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	meta := func(m map[string]any) map[string]any {
		out := make(map[string]any, len(m)+1)
		for k, v := range m {
			out[k] = v
		}
		if info.Counters != nil {
			out["tito_mismatch"] = info.Counters
		}
		return out
	}
	if len(p.Samples) == 0 {
		if err := enc.Encode(emptyLine{SessionID: info.SessionID, EmptyReason: p.EmptyReason, Metadata: meta(nil)}); err != nil {
			return err
		}
	}
	for i, s := range p.Samples {
		f := fieldsOf(s)
		line := jsonLine{Index: i, SessionID: info.SessionID, Tokens: s.Tokens, RolloutLogProbs: s.RolloutLogProbs,
			ResponseLength: f.ResponseLength, TurnStarts: s.TurnStarts, Status: strings.ToUpper(string(f.Status)),
			Response: f.Response, WeightVersions: f.WeightVersions, PrefixCacheInfo: f.PrefixCacheInfo, Metadata: meta(f.Metadata), Reward: s.Reward}
		line.LossMask = make([]int, len(s.LossMask))
		for j, m := range s.LossMask {
			line.LossMask[j] = int(m)
		}
		if info.TokenText != nil {
			line.TokenTexts = make([]string, len(s.Tokens))
			for j, id := range s.Tokens {
				line.TokenTexts[j] = info.TokenText(id)
			}
		}
		if err := enc.Encode(line); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// ReadJSONLines reads what WriteJSONLines wrote (the counters and token
// texts are not kept).
func ReadJSONLines(r io.Reader) (*Payload, error) {
	p := &Payload{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var l struct {
			jsonLine
			EmptyReason *string `json:"empty_reason"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, err
		}
		if l.EmptyReason != nil {
			p.EmptyReason = *l.EmptyReason
			continue
		}
		s := Sample{Tokens: l.Tokens, RolloutLogProbs: l.RolloutLogProbs, ResponseLength: l.ResponseLength, TurnStarts: l.TurnStarts,
			Status: Status(strings.ToLower(l.Status)), Response: l.Response, WeightVersions: l.WeightVersions,
			PrefixCacheInfo: l.PrefixCacheInfo, Metadata: l.Metadata, Reward: l.Reward}
		delete(s.Metadata, "tito_mismatch")
		for _, m := range l.LossMask {
			s.LossMask = append(s.LossMask, uint8(m))
		}
		p.Samples = append(p.Samples, s)
	}
	return p, sc.Err()
}
