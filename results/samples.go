package results

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/berth-sh/berth/results/layout"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Sample statuses, as the session server assigns them from the engine's
// finish_reason (stop/tool_calls, length, abort).
const (
	SampleCompleted = "COMPLETED"
	SampleTruncated = "TRUNCATED"
	SampleAborted   = "ABORTED"
)

// Bounds of the samples reader.
const (
	// MaxSampleLine bounds one JSON line (one sample).
	MaxSampleLine = 64 << 20
	// MaxSamples bounds the samples read from one file.
	MaxSamples = 10000
)

// Sample is one line of samples.jsonl. See the package doc for the format.
type Sample struct {
	Index          int                        `json:"index"`
	SessionID      string                     `json:"session_id"`
	Tokens         []int                      `json:"tokens"`
	TokenTexts     []string                   `json:"token_texts"`
	LossMask       []int                      `json:"loss_mask"`
	LogProbs       []float64                  `json:"rollout_log_probs"`
	ResponseLength int                        `json:"response_length"`
	TurnStarts     []int                      `json:"turn_starts"`
	Status         string                     `json:"status"`
	Reward         json.RawMessage            `json:"reward"`
	Response       string                     `json:"response"`
	Metadata       map[string]json.RawMessage `json:"metadata"`

	// Line is the sample's line number in the file (from 1).
	Line int `json:"-"`
	// Problems are inconsistencies found in the sample (lengths that do
	// not line up); the sample is still shown as far as it can be.
	Problems []string `json:"-"`
}

// SampleFile is a read samples.jsonl.
type SampleFile struct {
	Samples []*Sample
	// Errors are lines that are not a sample, with their line number.
	Errors []string
	// More says samples past MaxSamples were left out.
	More bool
}

// Samples reads a trial's samples.jsonl.
func (l *Library) Samples(ctx context.Context, ref Ref, trialName string) (*SampleFile, error) {
	if _, err := l.resolve(ref); err != nil {
		return nil, err
	}
	if !validName(trialName) {
		return nil, errdefs.Errorf(errdefs.NotFound, "no trial %q", trialName)
	}
	r := l.roots[ref.Root]
	f, _, err := r.tree.open(path.Join(ref.Name, trialName, layout.SamplesFile))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadSamples(ctx, f)
}

// ReadSamples reads samples.jsonl from r: one JSON object per line, blank
// lines skipped, bad lines reported and skipped.
func ReadSamples(ctx context.Context, r io.Reader) (*SampleFile, error) {
	out := &SampleFile{}
	br := bufio.NewReaderSize(r, 1<<20)
	for line := 1; ; line++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b, tooLong, err := readLine(br, MaxSampleLine)
		if len(bytes.TrimSpace(b)) > 0 || tooLong {
			if len(out.Samples) >= MaxSamples {
				out.More = true
				break
			}
			switch s, perr := parseSample(b, tooLong); {
			case perr != nil:
				out.Errors = append(out.Errors, fmt.Sprintf("line %d: %v", line, perr))
			default:
				s.Line = line
				if s.Index == 0 && len(out.Samples) > 0 {
					s.Index = len(out.Samples)
				}
				out.Samples = append(out.Samples, s)
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readLine reads one line of at most limit bytes; a longer one is skipped
// to its end and reported as too long.
func readLine(br *bufio.Reader, limit int) ([]byte, bool, error) {
	var buf []byte
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(buf)+len(chunk) > limit {
				tooLong, buf = true, nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return buf, tooLong, err
	}
}

func parseSample(b []byte, tooLong bool) (*Sample, error) {
	if tooLong {
		return nil, fmt.Errorf("longer than %s; skipped", sizeString(MaxSampleLine))
	}
	var s Sample
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("not a sample: %v", err)
	}
	s.check()
	return &s, nil
}

// check notes lengths that do not line up. The loss mask and logprobs
// cover the last len(loss_mask) tokens (the response); token_texts, when
// given, covers every token.
func (s *Sample) check() {
	n := len(s.Tokens)
	if len(s.LossMask) > n {
		s.Problems = append(s.Problems, fmt.Sprintf("loss_mask has %d entries for %d tokens; extra entries ignored", len(s.LossMask), n))
		s.LossMask = s.LossMask[:n]
	}
	if len(s.LogProbs) > n {
		s.Problems = append(s.Problems, fmt.Sprintf("rollout_log_probs has %d entries for %d tokens; extra entries ignored", len(s.LogProbs), n))
		s.LogProbs = s.LogProbs[:n]
	}
	if len(s.LossMask) > 0 && len(s.LogProbs) > 0 && len(s.LossMask) != len(s.LogProbs) {
		s.Problems = append(s.Problems, fmt.Sprintf("loss_mask (%d) and rollout_log_probs (%d) differ in length", len(s.LossMask), len(s.LogProbs)))
	}
	if s.ResponseLength > 0 && len(s.LossMask) > 0 && s.ResponseLength != len(s.LossMask) {
		s.Problems = append(s.Problems, fmt.Sprintf("response_length %d but loss_mask has %d entries", s.ResponseLength, len(s.LossMask)))
	}
	if len(s.TokenTexts) > 0 && len(s.TokenTexts) != n {
		s.Problems = append(s.Problems, fmt.Sprintf("token_texts has %d entries for %d tokens; shown as ids", len(s.TokenTexts), n))
		s.TokenTexts = nil
	}
	switch s.Status {
	case SampleCompleted, SampleTruncated, SampleAborted:
	case "":
		s.Problems = append(s.Problems, "no status")
	default:
		s.Problems = append(s.Problems, fmt.Sprintf("unknown status %q", s.Status))
	}
	s.TurnStarts = slices.DeleteFunc(slices.Clone(s.TurnStarts), func(i int) bool { return i < 0 || i >= n })
	slices.Sort(s.TurnStarts)
}

// Token is one token of a sample, as shown.
type Token struct {
	Pos      int
	ID       int
	Text     string // decoded text; "" when the sample has none
	HasText  bool
	Loss     bool    // loss_mask 1: the trainer learns from this token
	Masked   bool    // inside the masked region (the response), 0 or 1
	LogProb  float64 // rollout logprob; NaN when none
	TurnHead int     // turn number (from 1) when a turn starts here, else 0
}

// PromptLength is the number of tokens before the response (those the
// loss mask does not cover).
func (s *Sample) PromptLength() int { return len(s.Tokens) - len(s.LossMask) }

// LossTokens counts tokens with loss_mask 1.
func (s *Sample) LossTokens() int {
	n := 0
	for _, m := range s.LossMask {
		if m != 0 {
			n++
		}
	}
	return n
}

// Turns are the token positions where turns start: turn_starts when the
// sample has them, else the first token and every token where the loss
// mask goes from 1 back to 0 (an observation after a model turn).
func (s *Sample) Turns() []int {
	if len(s.TurnStarts) > 0 {
		return s.TurnStarts
	}
	if len(s.Tokens) == 0 {
		return nil
	}
	out := []int{0}
	p := s.PromptLength()
	for i := 1; i < len(s.LossMask); i++ {
		if s.LossMask[i-1] != 0 && s.LossMask[i] == 0 {
			out = append(out, p+i)
		}
	}
	return out
}

// Window returns tokens [from, from+n) with their mask, logprob and turn
// marks.
func (s *Sample) Window(from, n int) []Token {
	from = max(from, 0)
	end := min(from+n, len(s.Tokens))
	if from >= end {
		return nil
	}
	turns := s.Turns()
	turnAt := make(map[int]int, len(turns))
	for i, p := range turns {
		turnAt[p] = i + 1
	}
	p := s.PromptLength()
	out := make([]Token, 0, end-from)
	for i := from; i < end; i++ {
		t := Token{Pos: i, ID: s.Tokens[i], LogProb: math.NaN(), TurnHead: turnAt[i]}
		if s.TokenTexts != nil {
			t.Text, t.HasText = s.TokenTexts[i], true
		}
		if j := i - p; j >= 0 {
			t.Masked = true
			t.Loss = s.LossMask[j] != 0
		}
		if j := i - (len(s.Tokens) - len(s.LogProbs)); j >= 0 {
			t.LogProb = s.LogProbs[j]
		}
		out = append(out, t)
	}
	return out
}

// Counter is one TITO mismatch counter.
type Counter struct {
	Name  string
	Value string
	Bad   bool // non-zero: the session's token ids diverged from a re-rendering
}

// TITOCounters are the mismatch counters in metadata.tito_mismatch (an
// object of counters: special_token_count, special_token_type,
// non_assistant_text, ...), sorted by name; the three the CI gate checks
// are always listed.
func (s *Sample) TITOCounters() []Counter {
	m := map[string]json.RawMessage{}
	if raw, ok := s.Metadata["tito_mismatch"]; ok {
		_ = json.Unmarshal(raw, &m)
	}
	for _, k := range []string{"special_token_count", "special_token_type", "non_assistant_text"} {
		if _, ok := m[k]; !ok {
			m[k] = nil
		}
	}
	out := make([]Counter, 0, len(m))
	for k, v := range m {
		c := Counter{Name: k, Value: "not recorded"}
		var f float64
		if v != nil && json.Unmarshal(v, &f) == nil {
			c.Value = strconv.FormatFloat(f, 'g', -1, 64)
			c.Bad = f != 0
		} else if v != nil {
			c.Value, c.Bad = clip(jsonText(v)), true
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Counter) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// RewardText is the sample's reward as written (a number or an object).
func (s *Sample) RewardText() string { return clip(jsonText(s.Reward)) }

// MetadataText is the metadata as indented JSON.
func (s *Sample) MetadataText() string {
	if len(s.Metadata) == 0 {
		return ""
	}
	b, err := json.MarshalIndent(s.Metadata, "", "  ")
	if err != nil {
		return ""
	}
	return clip(string(b))
}
