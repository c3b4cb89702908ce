package samples

import (
	"slices"
	"sort"
)

// The tree of a v2 session as its metadata shows it, and what the samples
// op does with one sample per leaf, after Miles's session server v2
// (radixark/miles at 31f1ca961a94cb860cec3b2dea34ec332bfa8f76:
// miles/rollout/session/v2/utils.py tree_metadata and build_leaf_material,
// v2/picker_hub/drop_retries.py, v2/postprocessor_hub/default_postprocess.py).
// Each leaf's root-to-leaf turns assemble into one sample as a linear
// session's do (FromTurns, Truncate, Merge); a leaf whose turns all
// truncate away is dropped. Then the pick hook (DropRetries) drops the
// leaves a retry superseded, and the post-process hook (Finish) gives each
// shared completion's loss mask to one leaf, lays the agent's metadata
// under the server's, and sets the agent's reward. Miles lets
// --session-sample-picker-path and --session-sample-postprocessor-path
// name other Python hooks; berth has these defaults.

// TreeNode is a row of the tree's node table ("tree"."nodes"): id and seq
// are the commit order; completion_span is where the turn's output lies
// in its path's ids; num_tokens is the length of that path. Branch and
// FinishReason are berth's.
type TreeNode struct {
	ID             int     `json:"id"`
	Parent         *int    `json:"parent"`
	Seq            int     `json:"seq"`
	Truncated      bool    `json:"truncated"`
	CommittedAt    float64 `json:"committed_at"`
	CompletionSpan [2]int  `json:"completion_span"`
	NumTokens      int     `json:"num_tokens"`
	ResponseID     string  `json:"response_id"`
	Branch         string  `json:"branch"`
	FinishReason   string  `json:"finish_reason"`
}

// TreeLeaf is a row of the leaf table ("tree"."leaves").
type TreeLeaf struct {
	NodeID      int    `json:"node_id"`
	PathNodeIDs []int  `json:"path_node_ids"`
	Branch      string `json:"branch"`
}

// TreeBranch is one of berth's branches ("tree"."branches"): a session id
// on the tree, the branch it was forked from and the node it was forked
// at (null: its own start).
type TreeBranch struct {
	SessionID   string `json:"session_id"`
	Parent      string `json:"parent,omitempty"`
	ForkNodeID  *int   `json:"fork_node_id"`
	AbortReason string `json:"abort_reason,omitempty"`
}

// Tree is the "tree" block of a v2 session's metadata.
type Tree struct {
	Nodes    []TreeNode   `json:"nodes"`
	Leaves   []TreeLeaf   `json:"leaves"`
	Branches []TreeBranch `json:"branches"`
}

// Leaf is a sample's leaf descriptor (its metadata "leaf"): the node it
// ends at, that node's parent, the path, the reply id the agent saw, and
// (berth) the branch that committed it.
type Leaf struct {
	NodeID      int    `json:"node_id"`
	Parent      *int   `json:"parent"`
	PathNodeIDs []int  `json:"path_node_ids"`
	ResponseID  string `json:"response_id"`
	Branch      string `json:"branch"`
}

// LeafSample is a leaf's assembled sample with its descriptor.
type LeafSample struct {
	Sample
	Leaf Leaf
}

// DropRetries is Miles's default pick hook: a leaf that a later sibling
// of the same branch supersedes (the agent re-sent the turn and went on
// from the new reply) is the abandoned attempt and is dropped; a root is
// never superseded. A sibling of another branch is a fork, not a retry
// (berth's reading; with one branch it is Miles's rule). The kept leaves
// come deepest first, then latest first.
func DropRetries(ls []LeafSample, t Tree) []LeafSample {
	byID := make(map[int]TreeNode, len(t.Nodes))
	children := map[int][]int{}
	for _, n := range t.Nodes {
		byID[n.ID] = n
		if n.Parent != nil {
			children[*n.Parent] = append(children[*n.Parent], n.ID)
		}
	}
	var kept []LeafSample
	for _, s := range ls {
		if s.Leaf.Parent != nil && slices.ContainsFunc(children[*s.Leaf.Parent], func(sib int) bool {
			return sib > s.Leaf.NodeID && byID[sib].Branch == byID[s.Leaf.NodeID].Branch
		}) {
			continue
		}
		kept = append(kept, s)
	}
	sort.SliceStable(kept, func(i, j int) bool {
		a, b := kept[i].Leaf, kept[j].Leaf
		if len(a.PathNodeIDs) != len(b.PathNodeIDs) {
			return len(a.PathNodeIDs) > len(b.PathNodeIDs)
		}
		return a.NodeID > b.NodeID
	})
	return kept
}

// OwnShared is the ownership half of Miles's default post-process hook: a
// completion on the path of several kept leaves is trainable only in the
// earliest committed of them (the least node id); in the others its loss
// mask is 0. Ownership is decided over ls, after picking, so a dropped
// leaf owns nothing. The masks are rewritten in place.
func OwnShared(ls []LeafSample, t Tree) {
	span := make(map[int][2]int, len(t.Nodes))
	for _, n := range t.Nodes {
		span[n.ID] = n.CompletionSpan
	}
	owner := map[int]int{}
	for _, s := range ls {
		for _, id := range s.Leaf.PathNodeIDs {
			if o, ok := owner[id]; !ok || s.Leaf.NodeID < o {
				owner[id] = s.Leaf.NodeID
			}
		}
	}
	for i := range ls {
		s := &ls[i]
		start := len(s.Tokens) - s.ResponseLength
		for _, id := range s.Leaf.PathNodeIDs {
			if owner[id] == s.Leaf.NodeID {
				continue
			}
			lo := max(span[id][0]-start, 0)
			hi := min(span[id][1]-start, s.ResponseLength)
			for j := lo; j < hi; j++ {
				s.LossMask[j] = 0
			}
		}
	}
}

// ServerKeys are the metadata keys the server owns: an agent's metadata
// cannot replace them (Miles's _SERVER_OWNED_METADATA_KEYS, and berth's
// mismatch counts and abort reason).
var ServerKeys = []string{"accumulated_token_ids", "tito_session_mismatch", "leaf", "mismatch_counts", "mismatch_error", "abort_reason"}

// WithAgent is the metadata half of the default post-process hook: the
// sample's metadata, then agent's (but for the server's keys), then the
// server's keys again; and the agent's "reward", when it has one, becomes
// the sample's reward.
func (s *Sample) WithAgent(agent map[string]any) {
	md := make(map[string]any, len(s.Metadata)+len(agent))
	for k, v := range s.Metadata {
		md[k] = v
	}
	for k, v := range agent {
		if !slices.Contains(ServerKeys, k) {
			md[k] = v
		}
	}
	s.Metadata = md
	if r, ok := agent["reward"]; ok && r != nil {
		s.Reward = r
	}
}
