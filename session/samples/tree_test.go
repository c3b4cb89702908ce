package samples

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func ptr(i int) *int { return &i }

// The drop_retries docstring's tree, plus a fork: seq 0 turn 1; seq 1 turn
// 2 cut at the length cap; seq 2 the retry of turn 2; seq 3 turn 3 on the
// retry's path; seq 4 another branch's turn 2 beside them.
var retryTree = Tree{Nodes: []TreeNode{
	{ID: 0, Branch: "a", CompletionSpan: [2]int{2, 4}},
	{ID: 1, Parent: ptr(0), Branch: "a", CompletionSpan: [2]int{6, 8}},
	{ID: 2, Parent: ptr(0), Branch: "a", CompletionSpan: [2]int{6, 8}},
	{ID: 3, Parent: ptr(2), Branch: "a", CompletionSpan: [2]int{10, 12}},
	{ID: 4, Parent: ptr(0), Branch: "b", CompletionSpan: [2]int{6, 9}},
}}

func leafSample(id int, parent *int, path []int, tokens int) LeafSample {
	return LeafSample{Sample: Sample{Tokens: make([]int, tokens), ResponseLength: tokens - 2, LossMask: slices.Repeat([]uint8{1}, tokens-2)},
		Leaf: Leaf{NodeID: id, Parent: parent, PathNodeIDs: path}}
}

// TestDropRetriesAndOwnership: the superseded attempt is dropped, the fork
// beside it is not (another branch), the kept leaves come deepest first;
// the shared first turn is trainable in the earliest kept leaf only.
func TestDropRetriesAndOwnership(t *testing.T) {
	ls := []LeafSample{leafSample(1, ptr(0), []int{0, 1}, 8), leafSample(3, ptr(2), []int{0, 2, 3}, 12), leafSample(4, ptr(0), []int{0, 4}, 9)}
	kept := DropRetries(ls, retryTree)
	if len(kept) != 2 || kept[0].Leaf.NodeID != 3 || kept[1].Leaf.NodeID != 4 {
		t.Fatalf("kept %v", kept)
	}
	OwnShared(kept, retryTree)
	// Leaf 3 owns turn 1 (positions 2-3, mask 0-1); leaf 4 does not.
	if !slices.Equal(kept[0].LossMask, slices.Repeat([]uint8{1}, 10)) {
		t.Errorf("leaf 3 mask %v", kept[0].LossMask)
	}
	if want := []uint8{0, 0, 1, 1, 1, 1, 1}; !slices.Equal(kept[1].LossMask, want) {
		t.Errorf("leaf 4 mask %v, want %v", kept[1].LossMask, want)
	}
	// A fork beside the last turn: kept; with one branch everywhere it is
	// Miles's rule, and the later sibling is a retry.
	fork := Tree{Nodes: []TreeNode{{ID: 0, Branch: "a"}, {ID: 1, Parent: ptr(0), Branch: "a"}, {ID: 2, Parent: ptr(0), Branch: "b"}}}
	two := []LeafSample{leafSample(1, ptr(0), []int{0, 1}, 8), leafSample(2, ptr(0), []int{0, 2}, 8)}
	if kept := DropRetries(two, fork); len(kept) != 2 {
		t.Errorf("fork: kept %v", kept)
	}
	fork.Nodes[2].Branch = "a"
	if kept := DropRetries(two, fork); len(kept) != 1 || kept[0].Leaf.NodeID != 2 {
		t.Errorf("one branch: kept %v", kept)
	}
}

// TestWithAgent: the agent's metadata cannot replace the server's keys,
// and its reward becomes the sample's.
func TestWithAgent(t *testing.T) {
	s := Sample{Metadata: map[string]any{"leaf": "server", "accumulated_token_ids": []int{1}, "lifecycle": 1}}
	s.WithAgent(map[string]any{"leaf": "agent", "accumulated_token_ids": "x", "abort_reason": "no", "task": "t", "reward": 0.5})
	if s.Metadata["leaf"] != "server" || s.Metadata["task"] != "t" || s.Metadata["abort_reason"] != nil || s.Reward != 0.5 || s.Metadata["lifecycle"] != 1 {
		t.Fatalf("%+v reward %v", s.Metadata, s.Reward)
	}
	s.WithAgent(map[string]any{"reward": nil})
	if s.Reward != 0.5 {
		t.Error("a null reward replaced the reward")
	}
}

// TestRewardOnTheV2WireOnly: the v2 payload carries "reward" for every
// sample (null when unassigned) and reads back; the v1 payload has no
// such key, as Miles's v1 codec.
func TestRewardOnTheV2WireOnly(t *testing.T) {
	mk := func(v2 bool) *Payload {
		return &Payload{V2: v2, Samples: []Sample{
			{Tokens: []int{1, 2}, ResponseLength: 1, LossMask: []uint8{1}, RolloutLogProbs: []float64{-1}, Status: Completed, Reward: 1.5},
			{Tokens: []int{1, 3}, ResponseLength: 1, LossMask: []uint8{1}, RolloutLogProbs: []float64{-1}, Status: Aborted},
		}}
	}
	for _, v2 := range []bool{false, true} {
		b, err := EncodeSafetensors(mk(v2))
		if err != nil {
			t.Fatal(err)
		}
		ts, _ := ReadSafetensors(b)
		meta := string(ts[MetaTensor].Data)
		if strings.Contains(meta, `"reward"`) != v2 || (v2 && (!strings.Contains(meta, `"reward":1.5`) || !strings.Contains(meta, `"reward":null`))) {
			t.Errorf("v2 %v: meta %s", v2, meta)
		}
		p, err := DecodeSafetensors(b)
		if err != nil || p.V2 != v2 {
			t.Fatalf("decode: %v v2 %v", err, p.V2)
		}
		if want := any(nil); v2 {
			want = 1.5
			if p.Samples[0].Reward != want || p.Samples[1].Reward != nil {
				t.Errorf("rewards %v %v", p.Samples[0].Reward, p.Samples[1].Reward)
			}
		} else if p.Samples[0].Reward != want {
			t.Errorf("v1 reward %v", p.Samples[0].Reward)
		}
		var pm map[string]json.RawMessage
		json.Unmarshal(ts[MetaTensor].Data, &pm)
		if _, ok := pm["samples"]; !ok {
			t.Error("no samples in the meta")
		}
	}
}
