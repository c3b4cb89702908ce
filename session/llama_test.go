package session_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/berth-sh/berth/internal/testing/llamatest"
	"github.com/berth-sh/berth/session"
	"github.com/berth-sh/berth/session/tito"
)

// gated fails t when the session has a mismatch of a type the strict gate
// counts (all but assistant_text).
func gated(t *testing.T, info *session.Info) {
	t.Helper()
	if info.Metadata.Mismatch == nil {
		t.Fatalf("session %s: no mismatch check (%s)", info.SessionID, info.Metadata.MismatchError)
	}
	for _, m := range *info.Metadata.Mismatch {
		if m.Type != tito.AssistantText {
			t.Errorf("session %s: %s mismatch: %s\nexpected %q\nactual   %q", info.SessionID, m.Type, m.Detail, m.ExpectedText, m.ActualText)
		}
	}
}

// TestRealEngineLengthCut: a turn the real engine cut at max_tokens
// (no <|im_end|>), then another turn. The next prompt closes the cut turn
// as Qwen3's template renders every assistant turn (<|im_end|>\n), so the
// session's ids match a rendering of its transcript: no gated mismatch,
// where before the fix the increment followed the cut text directly
// (special_token_count: one <|im_end|> fewer than the rendering).
func TestRealEngineLengthCut(t *testing.T) {
	st := llamatest.NewStack(t, llamatest.Options{Sequences: 2})
	ctx := t.Context()
	id, err := st.Client.Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	msgs := []llamatest.Message{{Role: "system", Content: "You are a test."}, {Role: "user", Content: "Say something."}}
	cutAt := -1 // the turn that was cut and had one after it
	var last llamatest.Reply
	for turn := 0; turn < 8 && cutAt < 0; turn++ {
		// Two tokens: most turns are cut, some stop first.
		rep := st.Chat(t, id, msgs, map[string]any{"max_tokens": 2, "seed": 100 + turn})
		if turn > 0 && last.FinishReason == "length" {
			cutAt = turn - 1
		}
		last = rep
		msgs = append(msgs, llamatest.Message{Role: "assistant", Content: rep.Content}, llamatest.Message{Role: "user", Content: fmt.Sprintf("Go on (%d).", turn)})
	}
	if cutAt < 0 {
		t.Fatal("the engine never cut a turn at max_tokens before another turn")
	}
	info, err := st.Client.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	gated(t, info)
	// The prompt after the cut continues its output with <|im_end|>\n.
	prompt := func(i int) []int { return recordIDs(t, info.Records[i].Request) }
	cut := info.Records[cutAt]
	out, err := llamatest.ParseReply(cut.Response)
	if err != nil {
		t.Fatal(err)
	}
	p, next := prompt(cutAt), prompt(cutAt+1)
	closing, _ := st.Codec.Tok.Encode("<|im_end|>\n")
	if end := len(p) + len(out.OutputIDs); len(next) < end+len(closing) || !slices.Equal(next[:end], slices.Concat(p, out.OutputIDs)) || !slices.Equal(next[end:end+len(closing)], closing) {
		t.Fatalf("the prompt after the cut turn is not its prompt, its output and <|im_end|>\\n")
	}
	// Its samples assemble; the cut turn ends the merged sample.
	p2, err := st.Client.Samples(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(p2.Samples) != 1 || p2.Samples[0].Status != "truncated" {
		t.Fatalf("samples %+v", p2.Samples)
	}
}

// recordIDs reads a recorded request's input_ids.
func recordIDs(t *testing.T, req []byte) []int {
	t.Helper()
	var r struct {
		InputIDs []int `json:"input_ids"`
	}
	if err := json.Unmarshal(req, &r); err != nil || len(r.InputIDs) == 0 {
		t.Fatalf("record request without input_ids: %v", err)
	}
	return r.InputIDs
}

// TestRealEngineSessions: three sessions of five turns each at once, the
// real engine's replies stopped or cut as it happens: every session's ids
// match a rendering of its transcript (no gated mismatch), each turn after
// the first reuses the session's evaluated prefix in the engine, and each
// sample's loss mask is 1 exactly on the engine's output ids, with the
// engine's logprobs there and 0 elsewhere.
func TestRealEngineSessions(t *testing.T) {
	st := llamatest.NewStack(t, llamatest.Options{Sequences: 4})
	ids := make([]string, 3)
	t.Run("turns", func(t *testing.T) {
		for i := range ids {
			id, err := st.Client.Create(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			ids[i] = id
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				msgs := []llamatest.Message{{Role: "user", Content: fmt.Sprintf("Task %d: list the files.", i)}}
				prev := 0
				for turn := range 5 {
					rep := st.Chat(t, id, msgs, map[string]any{"max_tokens": 6 + 5*((i+turn)%3), "seed": 10*i + turn + 1})
					if turn > 0 && rep.CachedTokens < prev {
						t.Errorf("turn %d: %d cached tokens, the previous prompt had %d", turn+1, rep.CachedTokens, prev)
					}
					prev = rep.PromptTokens
					msgs = append(msgs, llamatest.Message{Role: "assistant", Content: rep.Content},
						llamatest.Message{Role: "user", Content: fmt.Sprintf("Output of turn %d:\n  a.txt  b.txt\n", turn+1)})
				}
			})
		}
	})
	for _, id := range ids {
		info, err := st.Client.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Records) != 5 {
			t.Fatalf("session %s: %d records", id, len(info.Records))
		}
		gated(t, info)
		checkSample(t, st, id)
	}
}

// checkSample checks a session's merged sample against the engine calls
// the recorder saw.
func checkSample(t *testing.T, st *llamatest.Stack, id string) {
	t.Helper()
	p, err := st.Client.Samples(t.Context(), id, 0)
	if err != nil || len(p.Samples) != 1 {
		t.Fatalf("samples: %v %+v", err, p)
	}
	s := p.Samples[0]
	mask := make([]int, len(s.LossMask))
	for i, m := range s.LossMask {
		mask[i] = int(m)
	}
	llamatest.CheckSample(t, st.Turns(id), s.Tokens, mask, s.RolloutLogProbs)
}
