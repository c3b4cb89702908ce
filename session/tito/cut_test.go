package tito_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/berth-sh/berth/internal/testing/qwen3test"
	"github.com/berth-sh/berth/session/tito"
)

func parse(t *testing.T, s string) tito.Message {
	t.Helper()
	m, err := tito.ParseMessage(json.RawMessage(s))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func enc(t *testing.T, c *tito.Codec, s string) []int {
	t.Helper()
	ids, err := c.Tok.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// turns runs a Qwen3 trajectory whose model replies are outs (raw output
// text, <|im_end|> included when the model stopped), each followed by a
// user message, and returns it with the prompt of every turn.
func turns(t *testing.T, c *tito.Codec, outs ...string) (*tito.Trajectory, [][]int) {
	t.Helper()
	kw, _ := c.MergeKwargs(nil)
	tr := &tito.Trajectory{}
	req := []tito.Message{parse(t, `{"role":"user","content":"start"}`)}
	var prompts [][]int
	for i, out := range outs {
		p, err := tr.Prepare(c, req, tito.Tools{}, kw, tito.Strict)
		if err != nil {
			t.Fatal(err)
		}
		prompts = append(prompts, p)
		oids := enc(t, c, out)
		text, _ := c.Tok.Decode(oids, true)
		content, _ := json.Marshal(text)
		asst := parse(t, `{"role":"assistant","content":`+string(content)+`}`)
		if err := tr.Commit(req, asst, tito.Record{PromptIDs: p, OutputIDs: oids}, c.MaxTrimTokens()); err != nil {
			t.Fatalf("turn %d: %v", i+1, err)
		}
		req = append(slices.Clone(tr.Messages()), parse(t, `{"role":"user","content":"next"}`))
	}
	return tr, prompts
}

func gatedMismatches(t *testing.T, c *tito.Codec, tr *tito.Trajectory) []tito.Mismatch {
	t.Helper()
	ms, err := c.SessionMismatch(tr)
	if err != nil {
		t.Fatal(err)
	}
	var out []tito.Mismatch
	for _, m := range ms {
		if m.Type != tito.AssistantText {
			out = append(out, m)
		}
	}
	return out
}

// TestCutTurnIsClosed: a Qwen3 turn cut at max_tokens ends without
// <|im_end|>; the next prompt closes it with <|im_end|>\n before the next
// message, as the template renders the turn, and a session whose last
// turn was cut compares clean as well. Before the fix the next prompt went
// on from the cut text straight into <|im_start|>user, and both sessions
// had a special_token_count mismatch (one <|im_end|> fewer than the
// rendering), as a real engine's first 3-turn session showed.
func TestCutTurnIsClosed(t *testing.T) {
	c := qwen3test.Codec(t)
	tr, prompts := turns(t, c, "Hello there<|im_end|>", "This reply was cut at max", "Fine.<|im_end|>")
	cutEnd := len(prompts[1]) + len(enc(t, c, "This reply was cut at max"))
	want := enc(t, c, "<|im_end|>\n<|im_start|>user\nnext<|im_end|>\n<|im_start|>assistant\n")
	if got := prompts[2][cutEnd:]; !slices.Equal(got, want) {
		a, _ := c.Tok.Decode(got, false)
		t.Fatalf("the prompt after the cut turn goes on with %q", a)
	}
	if ms := gatedMismatches(t, c, tr); len(ms) != 0 {
		t.Fatalf("gated mismatches after a cut turn: %+v", ms)
	}
	last, _ := turns(t, c, "Hello there<|im_end|>", "cut in the last turn")
	if ms := gatedMismatches(t, c, last); len(ms) != 0 {
		t.Fatalf("gated mismatches with a cut last turn: %+v", ms)
	}
}

// TestDegenerateStopStillCounts: a turn that ended with <|endoftext|>
// instead of <|im_end|> is the model's fault, and the check keeps saying
// so (as Miles's strict checker does): closing cut turns hides nothing.
func TestDegenerateStopStillCounts(t *testing.T) {
	c := qwen3test.Codec(t)
	tr, _ := turns(t, c, "Hello there<|endoftext|>", "Fine.<|im_end|>")
	if ms := gatedMismatches(t, c, tr); len(ms) == 0 {
		t.Fatal("a turn that stopped at <|endoftext|> compares clean")
	}
}
