package rollout_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/harbor/agent/terminus"
	"github.com/berth-sh/berth/harbor/job"
	"github.com/berth-sh/berth/internal/testing/harbortest"
	"github.com/berth-sh/berth/internal/testing/llamatest"
	"github.com/berth-sh/berth/results/layout"
	"github.com/berth-sh/berth/rollout"
	"github.com/berth-sh/berth/rollout/agents"
	"github.com/berth-sh/berth/rollout/rollouttest"
	"github.com/berth-sh/berth/session/tito"
)

// TestRealEngineRollout is the real-engine tier's rollout: 8 samples of
// the smoke task on the fake provider, each a 5-turn terminus episode
// whose policy is llama.cpp serving the tiny Qwen3 (llamatest) through the
// session server. The model's replies never parse as terminus commands,
// so every turn is answered with the parse error (or, for a reply cut at
// max_tokens, with the cut notice) as a user message: five tool-call-free
// turns, some stopped at <|im_end|> and some cut. The strict gate passes
// (no gated mismatch in any session, TRUNCATED samples checked too), every
// trial has its 5 turns, and every sample's loss mask is 1 exactly on the
// engine's output ids, with its logprobs.
func TestRealEngineRollout(t *testing.T) {
	st := llamatest.NewStack(t, llamatest.Options{Sequences: 8})
	tasks := t.TempDir()
	rollouttest.CopyTask(t, os.DirFS("../smoke/builtin-task"), filepath.Join(tasks, "smoke"), "host")
	jobs := t.TempDir()
	tokenText := func(id int) string { s, _ := st.Codec.Tok.Decode([]int{id}, false); return s }
	res, err := rollout.Run(t.Context(), rollout.Config{
		Job:    job.Config{JobConfig: layout.JobConfig{JobName: "llama", JobsDir: jobs, TasksPath: tasks, Backend: "fake", NConcurrent: 8, NAttempts: 8}},
		Agent:  agents.Terminus(terminus.Options{Model: "tiny-qwen3", Shell: "pipe", MaxTurns: 5, MaxOutputTokens: 16, RetryDelay: 20 * time.Millisecond}),
		Strict: true,
	}, rollout.Options{Registry: harbortest.Registry(t, nil), Env: harbortest.Env(t), Sessions: st.Client, TokenText: tokenText})
	if res != nil && res.Rollout != nil {
		var b strings.Builder
		res.Rollout.Print(&b)
		t.Logf("\n%s", b.String())
	}
	if err != nil {
		t.Fatalf("rollout with the strict gate: %v", err)
	}
	if res.Rollout.Samples != 8 || res.Rollout.Checked != 8 {
		t.Fatalf("%d samples, %d checked", res.Rollout.Samples, res.Rollout.Checked)
	}
	finishes := map[string]int{}
	for _, d := range rollouttest.TrialDirs(t, filepath.Join(jobs, "llama")) {
		r := rollouttest.TrialResult(t, d)
		if r.AgentResult.Metadata["end"] != terminus.EndTurnLimit || r.AgentResult.Metadata["n_turns"] != 5.0 {
			t.Fatalf("%s: agent result %+v", d, r.AgentResult.Metadata)
		}
		ss := rollouttest.ReadSamples(t, d)
		if len(ss) != 1 {
			t.Fatalf("%s: %d samples", d, len(ss))
		}
		s := ss[0]
		if s.Metadata.Mismatch == nil {
			t.Fatalf("%s: no TITO check", d)
		}
		for _, m := range *s.Metadata.Mismatch {
			if m.Type != tito.AssistantText {
				t.Fatalf("%s: %s mismatch: %s", d, m.Type, m.Detail)
			}
		}
		turns := st.Turns(s.SessionID)
		if len(turns) != 5 {
			t.Fatalf("%s: the engine saw %d turns of its session", d, len(turns))
		}
		for _, tr := range turns {
			finishes[tr.FinishReason]++
		}
		llamatest.CheckSample(t, turns, s.Tokens, s.LossMask, s.LogProbs)
	}
	t.Logf("engine turns: %v", finishes)
	if finishes["stop"] == 0 || finishes["length"] == 0 {
		t.Fatalf("the rollout's turns did not both stop and get cut: %v", finishes)
	}
}
