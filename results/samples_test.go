package results_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/results"
	"github.com/berth-sh/berth/results/resultstest"
)

// The fixture testdata/samples.jsonl is hand-made in the format the
// package doc specifies: a two-turn chat with per-token text, a loss mask
// over the response with an observation span of zeros and logprobs; a
// truncated sample of bare ids with explicit turn starts and a non-zero
// TITO counter; a line that is not JSON; a sample whose lengths do not
// line up.
func readFixture(t *testing.T) *results.SampleFile {
	t.Helper()
	f, err := os.Open("testdata/samples.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sf, err := results.ReadSamples(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	return sf
}

func TestReadSamples(t *testing.T) {
	sf := readFixture(t)
	if len(sf.Samples) != 3 || len(sf.Errors) != 1 || !strings.HasPrefix(sf.Errors[0], "line 2: not a sample") {
		t.Fatalf("samples %d, errors %v", len(sf.Samples), sf.Errors)
	}
	s := sf.Samples[0]
	if s.Line != 1 || s.Status != results.SampleCompleted || len(s.Problems) != 0 {
		t.Fatalf("sample 0: line %d status %s problems %v", s.Line, s.Status, s.Problems)
	}
	if s.PromptLength() != 9 || s.LossTokens() != 5 || len(s.Tokens) != 24 {
		t.Errorf("prompt %d, loss tokens %d, tokens %d", s.PromptLength(), s.LossTokens(), len(s.Tokens))
	}
	// Turns: the start, and the observation after the first reply.
	if got := s.Turns(); len(got) != 2 || got[0] != 0 || got[1] != 12 {
		t.Errorf("turns = %v", got)
	}
	w := s.Window(0, 100)
	if len(w) != 24 {
		t.Fatalf("window = %d tokens", len(w))
	}
	if w[0].Text != "<|im_start|>" || w[0].Masked || w[0].Loss || !math.IsNaN(w[0].LogProb) || w[0].TurnHead != 1 {
		t.Errorf("prompt token = %+v", w[0])
	}
	if !w[9].Loss || w[9].Text != "Hello" || w[9].LogProb != -0.11 {
		t.Errorf("first reply token = %+v", w[9])
	}
	if w[12].TurnHead != 2 || w[12].Loss || !w[12].Masked || w[12].LogProb != 0 {
		t.Errorf("observation token = %+v", w[12])
	}
	if !w[23].Loss || w[23].LogProb != -0.002 || w[23].ID != 151645 {
		t.Errorf("last token = %+v", w[23])
	}
	if part := s.Window(20, 2); len(part) != 2 || part[0].Pos != 20 {
		t.Errorf("window from 20 = %+v", part)
	}
	for _, c := range s.TITOCounters() {
		if c.Bad || c.Value != "0" {
			t.Errorf("sample 0 counter %+v", c)
		}
	}

	s1 := sf.Samples[1]
	if s1.Status != results.SampleTruncated || s1.RewardText() == "" || s1.Line != 3 {
		t.Errorf("sample 1 = %+v", s1)
	}
	if got := s1.Turns(); len(got) != 2 || got[1] != 3 {
		t.Errorf("explicit turns = %v", got)
	}
	if w := s1.Window(0, 6); w[0].HasText || w[3].LogProb != -0.5 || !w[3].Loss || w[3].TurnHead != 2 {
		t.Errorf("ids-only window = %+v", w)
	}
	bad := map[string]bool{}
	for _, c := range s1.TITOCounters() {
		bad[c.Name] = c.Bad
	}
	if !bad["special_token_type"] || bad["special_token_count"] || len(bad) != 3 {
		t.Errorf("counters = %v", bad)
	}

	s2 := sf.Samples[2]
	if s2.Status != results.SampleAborted || len(s2.Problems) != 2 || len(s2.LossMask) != 2 || s2.TokenTexts != nil {
		t.Errorf("sample 2 problems %v, mask %v", s2.Problems, s2.LossMask)
	}
	// No counters recorded: the three gated ones are listed as such.
	for _, c := range s2.TITOCounters() {
		if c.Value != "not recorded" {
			t.Errorf("absent counter = %+v", c)
		}
	}
}

// TestTrialSamples: the reader finds samples.jsonl in a trial directory
// and refuses one that is a link.
func TestTrialSamples(t *testing.T) {
	data, err := os.ReadFile("testdata/samples.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	jobs := t.TempDir()
	dir := resultstest.Job(t, jobs, "j", true, time.Time{}, []resultstest.Trial{
		{Task: "a", Name: "a__1", Rewards: resultstest.Reward(1), Files: map[string]string{"samples.jsonl": string(data)}},
		{Task: "b", Name: "b__2", Rewards: resultstest.Reward(1)},
	})
	os.Symlink("/etc/passwd", filepath.Join(dir, "b__2", "samples.jsonl"))
	l := open(t, jobs)
	sf, err := l.Samples(context.Background(), results.Ref{Name: "j"}, "a__1")
	if err != nil || len(sf.Samples) != 3 {
		t.Fatalf("samples: %v %v", sf, err)
	}
	if _, err := l.Samples(context.Background(), results.Ref{Name: "j"}, "b__2"); err == nil {
		t.Error("a linked samples.jsonl was read")
	}
}
