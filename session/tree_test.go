package session

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/berth-sh/berth/results"
	"github.com/berth-sh/berth/session/samples"
	"github.com/berth-sh/berth/session/testengine"
)

// agentTurns runs turns on a session from msgs (each reply's tool results
// tagged with tag, the last turn asked to finish) and returns the
// messages before each turn and after the last.
func (e *testEnv) agentTurns(id, tag string, msgs []any, from, to int) (before [][]any, after []any) {
	e.t.Helper()
	for turn := from; turn <= to; turn++ {
		if turn == 4 {
			msgs = append(msgs, map[string]any{"role": "user", "content": finishPrompt})
		}
		before = append(before, slices.Clone(msgs))
		asst := e.chat(id, msgs, agentTools, false)
		msgs = append(msgs, asst)
		if turn < 4 {
			msgs = append(msgs, toolResults(tag, turn, asst)...)
		}
	}
	return before, msgs
}

// engineTurn is what the engine saw and said in one call.
type engineTurn struct {
	prompt, output []int
}

// engineTurns are a session's turns as the engine served them: the prompt
// it got and the ids it answered (read from its own replies, which the
// session's records keep verbatim).
func (e *testEnv) engineTurns(id string) []engineTurn {
	e.t.Helper()
	info, err := e.client.Get(e.t.Context(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []engineTurn
	for _, r := range info.Records {
		var req struct {
			InputIDs []int `json:"input_ids"`
		}
		var resp struct {
			Choices []struct {
				MetaInfo struct {
					OTL [][]any `json:"output_token_logprobs"`
				} `json:"meta_info"`
			} `json:"choices"`
		}
		if json.Unmarshal(r.Request, &req) != nil || json.Unmarshal(r.Response, &resp) != nil || len(resp.Choices) == 0 {
			e.t.Fatalf("record %s", r.Response)
		}
		var ids []int
		for _, l := range resp.Choices[0].MetaInfo.OTL {
			ids = append(ids, int(l[1].(float64)))
		}
		out = append(out, engineTurn{prompt: req.InputIDs, output: ids})
	}
	return out
}

// wantMask is the loss mask a leaf's sample must have: 1 on the outputs
// of the turns it trains, 0 on every other response position; and the
// logprobs: the engine's on every output, 0 elsewhere.
func wantMask(turns []engineTurn, trains func(turn int) bool) ([]uint8, []float64) {
	start := len(turns[0].prompt)
	last := turns[len(turns)-1]
	n := len(last.prompt) + len(last.output) - start
	mask, lps := make([]uint8, n), make([]float64, n)
	for i, t := range turns {
		for j, id := range t.output {
			pos := len(t.prompt) + j - start
			lps[pos] = testengine.LogProb(id, j)
			if trains(i + 1) {
				mask[pos] = 1
			}
		}
	}
	return mask, lps
}

// TestTreeForkAtTurnTwo is the v2 line: a 4-turn tree session
// forked at turn 2, the fork running turns 3 and 4 in its own sandbox
// (other tool output). The samples op gives two leaves and two samples:
// each the full ids its engine calls saw and said, the shared prefix (the
// first two turns) byte-identical in both tensors, the loss mask 1
// exactly on the policy's own outputs (the shared turns trainable only in
// the earlier leaf, as Miles's default post-process has it), the engine's
// logprobs, and the reward of its branch. The prefix went to the engine
// once, and the tree holds its ids once.
func TestTreeForkAtTurnTwo(t *testing.T) {
	e := newEnv(t, agentScript(func(c testengine.Call) string { return c.RoutingKey[:6] }), testengine.Options{}, nil)
	root, err := e.client.CreateTree(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	start := []any{
		map[string]any{"role": "system", "content": "You are a careful agent. Use the tools."},
		map[string]any{"role": "user", "content": "Investigate /tmp and report."},
	}
	before, _ := e.agentTurns(root, "root", start, 1, 4)
	fork, err := e.client.Fork(t.Context(), root, 2)
	if err != nil {
		t.Fatal(err)
	}
	// The fork replays the first two turns and goes on from its own
	// sandbox's answer to the second.
	rootTurns := e.engineTurns(root)
	a2 := before[2][len(before[1])].(map[string]any) // turn 2's reply, as the agent got it
	forkMsgs := append(slices.Clone(before[1]), a2)
	forkMsgs = append(forkMsgs, toolResults("fork", 2, a2)...)
	e.agentTurns(fork, "fork", forkMsgs, 3, 4)
	if n := len(e.eng.Calls()); n != 6 {
		t.Fatalf("%d engine calls, want 6: the shared turns go once", n)
	}
	forkTurns := e.engineTurns(fork)
	if len(forkTurns) != 4 || !slices.Equal(forkTurns[1].output, rootTurns[1].output) || !slices.Equal(forkTurns[0].prompt, rootTurns[0].prompt) {
		t.Fatalf("the fork's path does not start with the root's first two turns")
	}

	p, err := e.client.TreeSamples(t.Context(), fork, LeafRequest{Metadata: map[string]any{"reward": 0.25, "task": "t"},
		Branches: map[string]map[string]any{fork: {"reward": 1.0}}})
	if err != nil {
		t.Fatal(err)
	}
	if !p.V2 || len(p.Samples) != 2 || p.EmptyReason != "" {
		t.Fatalf("payload: v2 %v, %d samples (%q)", p.V2, len(p.Samples), p.EmptyReason)
	}
	byBranch := map[string]samples.Sample{}
	for _, s := range p.Samples {
		l, ok := LeafOf(s)
		if !ok || len(l.PathNodeIDs) != 4 {
			t.Fatalf("leaf %+v", s.Metadata["leaf"])
		}
		byBranch[l.Branch] = s
	}
	rs, fs := byBranch[root], byBranch[fork]
	for _, c := range []struct {
		s      samples.Sample
		turns  []engineTurn
		reward float64
		trains func(int) bool
	}{
		{rs, rootTurns, 0.25, func(int) bool { return true }},
		{fs, forkTurns, 1, func(turn int) bool { return turn > 2 }},
	} {
		last := c.turns[3]
		if !slices.Equal(c.s.Tokens, append(slices.Clone(last.prompt), last.output...)) {
			t.Fatalf("tokens are not the last engine call's prompt and output")
		}
		mask, lps := wantMask(c.turns, c.trains)
		if !slices.Equal(c.s.LossMask, mask) || !slices.Equal(c.s.RolloutLogProbs, lps) || c.s.ResponseLength != len(mask) {
			t.Errorf("mask or logprobs differ:\n got %v\nwant %v", c.s.LossMask, mask)
		}
		if c.s.Reward != c.reward || c.s.Status != samples.Completed || c.s.Metadata["task"] != "t" {
			t.Errorf("reward %v status %s metadata %v", c.s.Reward, c.s.Status, c.s.Metadata["task"])
		}
	}

	// Byte-identical: the raw tokens tensors agree over the first two
	// turns and differ right after (the fork's own tool output).
	_, _, raw := e.samplesRaw(t, root, `{}`, "")
	ts, err := samples.ReadSafetensors(raw)
	if err != nil {
		t.Fatal(err)
	}
	shared := len(rootTurns[1].prompt) + len(rootTurns[1].output)
	t0, t1 := ts["tokens.0"].Data, ts["tokens.1"].Data
	n := min(len(t0), len(t1))
	if !bytes.Equal(t0[:8*shared], t1[:8*shared]) || bytes.Equal(t0[8*shared:n], t1[8*shared:n]) {
		t.Errorf("the first %d tokens are not the shared prefix of both samples", shared)
	}

	info, err := e.client.Get(t.Context(), root)
	if err != nil {
		t.Fatal(err)
	}
	tree := info.Metadata.Tree
	if tree == nil || len(tree.Nodes) != 6 || len(tree.Leaves) != 2 || len(tree.Branches) != 2 || *tree.Nodes[4].Parent != 1 ||
		tree.Nodes[4].Branch != fork || *tree.Branches[1].ForkNodeID != 1 || tree.Branches[1].Parent != root {
		t.Fatalf("tree %+v", tree)
	}
	// The tree stores each id once: the two paths, less the shared turns.
	sess := e.srv.sessions[root]
	if got, want := sess.tree.Stored(), len(rs.Tokens)+len(fs.Tokens)-tree.Nodes[1].NumTokens; got != want {
		t.Errorf("the tree holds %d ids, want %d", got, want)
	}
	snapshots := 0 // what a node holding its whole path (Miles's) would hold
	for _, n := range tree.Nodes {
		snapshots += n.NumTokens
	}
	t.Logf("leaves of %d and %d ids sharing %d: the tree holds %d (whole-path snapshots: %d)", len(rs.Tokens), len(fs.Tokens), tree.Nodes[1].NumTokens, sess.tree.Stored(), snapshots)

	// As JSON lines, berth view's reader takes both leaves, each with its
	// own counters, the gated ones 0.
	_, _, jl := e.samplesRaw(t, root, `{}`, "application/x-ndjson")
	sf, err := results.ReadSamples(t.Context(), bytes.NewReader(jl))
	if err != nil || len(sf.Samples) != 2 || len(sf.Errors) != 0 {
		t.Fatalf("berth view's reader: %v %+v", err, sf)
	}
	for _, smp := range sf.Samples {
		if c := smp.TITOCounters(); len(c) != 4 || c[0].Bad || c[1].Bad || c[2].Bad || len(smp.Problems) != 0 {
			t.Errorf("counters %+v, problems %v", c, smp.Problems)
		}
	}

	// Deleting the first session leaves the tree to the fork.
	if err := e.client.Delete(t.Context(), root); err != nil {
		t.Fatal(err)
	}
	again, err := e.client.TreeSamples(t.Context(), fork, LeafRequest{})
	if err != nil || len(again.Samples) != 2 || again.Samples[0].Reward != nil {
		t.Fatalf("after deleting the root: %v", err)
	}
}

// TestTreeWireRefusals: forking a linear session or past the path is 400;
// a path cut at max_tokens is closed (409) and forks there are refused; a
// version other than v1 and v2 is 400; a v1 session's samples have no
// reward on the wire.
func TestTreeWireRefusals(t *testing.T) {
	e := newEnv(t, func(c testengine.Call) testengine.Reply {
		if c.N == 2 {
			return testengine.Reply{Text: "a very long answer that will not fit", FinishReason: "length"}
		}
		return testengine.Reply{Text: "ok"}
	}, testengine.Options{}, nil)
	lin := e.create()
	if status, body := e.post("/sessions/"+lin+"/fork", map[string]any{"turn": 0}); status != http.StatusBadRequest {
		t.Fatalf("forking a linear session: %d %s", status, body)
	}
	if status, _ := e.post("/sessions", map[string]any{"version": "v3"}); status != http.StatusBadRequest {
		t.Fatalf("version v3: %d", status)
	}
	e.chat(lin, []any{map[string]any{"role": "user", "content": "hi"}}, nil, false)
	if p, err := e.client.Samples(t.Context(), lin, 0); err != nil || p.V2 || p.Samples[0].Reward != nil {
		t.Fatalf("v1 samples: %v %+v", err, p)
	}

	tree, _ := e.client.CreateTree(t.Context())
	u := map[string]any{"role": "user", "content": "hi"}
	a1 := e.chat(tree, []any{u}, nil, false)
	a2 := e.chat(tree, []any{u, a1, map[string]any{"role": "user", "content": "more"}}, nil, false)
	status, body := e.post("/sessions/"+tree+"/v1/chat/completions", map[string]any{"messages": []any{u, a1,
		map[string]any{"role": "user", "content": "more"}, a2, map[string]any{"role": "user", "content": "go on"}}})
	if status != http.StatusConflict {
		t.Fatalf("extending a length cut: %d %s", status, body)
	}
	for turn, want := range map[int]int{2: http.StatusConflict, 3: http.StatusBadRequest, -1: http.StatusBadRequest} {
		if status, body := e.post("/sessions/"+tree+"/fork", map[string]any{"turn": turn}); status != want {
			t.Errorf("fork at %d: %d %s", turn, status, body)
		}
	}
	if _, err := e.client.Fork(t.Context(), tree, 1); err != nil {
		t.Errorf("fork before the cut: %v", err)
	}
}
