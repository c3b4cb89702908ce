package tito

import (
	"encoding/json"
	"fmt"
)

// MaxNodes is how many turns one tree holds (Miles's MAX_NODES): past it
// the session cannot branch or extend, which almost always means a
// harness that does not replay its history verbatim.
const MaxNodes = 1024

// A Tree is one session's append-only tree of turns, after Miles's session
// server v2 (radixark/miles miles/rollout/session/v2/tree_trajectory.py and
// session_state.py at 31f1ca961a94cb860cec3b2dea34ec332bfa8f76): a request
// attaches at the deepest node whose whole path of messages is a prefix of
// its messages (ties to the latest), the rest of its messages and the
// reply become a new child there, and nothing is ever removed: a retry, a
// divergence or a concurrent turn from the same node grows a sibling. A
// path that ended at max_tokens cannot be extended (ErrCutShort).
//
// Unlike Miles, a node keeps only its own ids: those of its parent it
// shares are the parent's (all but at most the family's max_trim_tokens
// last), so N branches of a long prefix hold the prefix once. A Branch is
// berth's handle on the tree (Fork): its requests attach among its own
// nodes and the path it was forked from, so that the branches of one fork
// never attach to each other's turns.
//
// A Tree is not safe for concurrent use; the session server holds one lock
// per tree around Prepare, Commit and Fork. Nodes are never written after
// Commit (but for their children, read under the lock), so a path can be
// read without it.
type Tree struct {
	// MaxTokens, when above 0, bounds a path's prompt (as
	// Trajectory.MaxTokens); MaxStored bounds the ids all nodes hold.
	MaxTokens, MaxStored int

	nodes    []*Node // in commit order: a node's Seq is its index
	roots    []*Node
	branches []*Branch
	stored   int
}

// Node is one committed turn.
type Node struct {
	// Seq is the commit order, the only ordering key (Miles's seq).
	Seq    int
	Parent *Node
	// Branch is the branch whose request committed it.
	Branch *Branch
	// ResponseID is the engine's reply id: the key that joins what an
	// agent saw with its leaf.
	ResponseID string

	children  []*Node
	delta     []Message // request messages past the parent's path, then the reply
	keep      int       // how many of the parent's ids this node's ids start with
	own       []int     // the rest: the prompt's increment, then the output
	promptLen int       // where the output starts in the node's ids
	depth     int       // turns on the path to here, this one included
	nmsgs     int       // messages on the path to here
	rec       Record    // PromptIDs and OutputIDs are derived from the ids
}

// Branch is a handle on a tree: its first branch, or a fork of one.
type Branch struct {
	// Name is what the session server calls it (its session id).
	Name string
	// Parent is the branch it was forked from; Base the node it was forked
	// at (nil: the first branch, or a fork at turn 0).
	Parent *Branch
	Base   *Node
	// Active is the end of its current path (Miles's active_leaf): what a
	// GET of it shows; nil before its first turn.
	Active *Node
	// Seq is its creation order.
	Seq int
	// AbortReason, when set, marks its samples ABORTED.
	AbortReason string

	onBase map[*Node]bool // Base and its ancestors
}

// NewBranch adds a branch with nothing of its own (a tree's first).
func (t *Tree) NewBranch(name string) *Branch {
	b := &Branch{Name: name, Seq: len(t.branches)}
	t.branches = append(t.branches, b)
	return b
}

// Fork adds a branch of from at its turn-th turn (1 is its first, 0 its
// start): the new branch shares the path to there, and nothing after.
func (t *Tree) Fork(from *Branch, turn int, name string) (*Branch, error) {
	path := from.Active.Path()
	if turn < 0 || turn > len(path) {
		return nil, invalidf("turn %d: the branch has turns 0 to %d", turn, len(path))
	}
	b := &Branch{Name: name, Parent: from, Seq: len(t.branches), onBase: map[*Node]bool{}}
	if turn > 0 {
		b.Base = path[turn-1]
		if err := extendable(b.Base.rec.FinishReason, true); err != nil {
			return nil, err
		}
		for _, n := range path[:turn] {
			b.onBase[n] = true
		}
	}
	b.Active = b.Base
	t.branches = append(t.branches, b)
	return b, nil
}

// Branches are the tree's branches, in creation order (shared: do not
// modify).
func (t *Tree) Branches() []*Branch { return t.branches }

// Nodes are the tree's nodes in commit order (shared: do not modify).
func (t *Tree) Nodes() []*Node { return t.nodes }

// Stored is how many ids the nodes hold, all together.
func (t *Tree) Stored() int { return t.stored }

// Leaves are the nodes without children, in commit order.
func (t *Tree) Leaves() []*Node {
	var out []*Node
	for _, n := range t.nodes {
		if len(n.children) == 0 {
			out = append(out, n)
		}
	}
	return out
}

// Children are a node's children in commit order (shared: do not modify).
func (n *Node) Children() []*Node { return n.children }

// FinishReason is the engine's finish_reason for the turn.
func (n *Node) FinishReason() string { return n.rec.FinishReason }

// Truncated reports a turn cut at max_tokens.
func (n *Node) Truncated() bool { return n.rec.FinishReason == "length" }

// Len is the number of ids on the path to the node, this turn's included.
func (n *Node) Len() int { return n.keep + len(n.own) }

// OwnLen is the number of ids the node holds itself.
func (n *Node) OwnLen() int { return len(n.own) }

// CompletionSpan is where the turn's output lies in the path's ids.
func (n *Node) CompletionSpan() (start, end int) { return n.promptLen, n.Len() }

// CommittedAt is when the turn was recorded (Unix seconds).
func (n *Node) CommittedAt() float64 { return n.rec.Timestamp }

// Depth is the number of turns on the path to the node.
func (n *Node) Depth() int {
	if n == nil {
		return 0
	}
	return n.depth
}

// Path is the nodes from the path's first turn to n (empty for nil).
func (n *Node) Path() []*Node {
	out := make([]*Node, n.Depth())
	for p := n; p != nil; p = p.Parent {
		out[p.depth-1] = p
	}
	return out
}

// IDs are the path's ids, built anew.
func (n *Node) IDs() []int {
	if n == nil {
		return nil
	}
	ids := make([]int, 0, n.Len())
	for _, p := range n.Path() {
		ids = append(ids[:p.keep], p.own...)
	}
	return ids
}

// Messages are the path's messages, built anew.
func (n *Node) Messages() []Message {
	if n == nil {
		return nil
	}
	out := make([]Message, 0, n.nmsgs)
	for _, p := range n.Path() {
		out = append(out, p.delta...)
	}
	return out
}

// visible reports whether b's requests may attach at n: its own nodes and
// the path it was forked from (a first branch sees its own only).
func (b *Branch) visible(n *Node) bool { return n.Branch == b || b.onBase[n] }

// attach is the deepest node visible to b whose path of messages is a
// prefix of req (the latest of equals), or nil.
func (t *Tree) attach(b *Branch, req []Message, m Matcher) *Node {
	type item struct {
		n   *Node
		off int
	}
	var stack []item
	push := func(ns []*Node, off int) {
		for i := len(ns) - 1; i >= 0; i-- {
			if b.visible(ns[i]) {
				stack = append(stack, item{ns[i], off})
			}
		}
	}
	push(t.roots, 0)
	var best *Node
	bestMatched := -1
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		d := it.n.delta
		i := 0
		for i < len(d) && it.off+i < len(req) && m.Match(d[i], req[it.off+i]) {
			i++
		}
		if i < len(d) {
			continue // a partial delta: neither it nor its subtree
		}
		matched := it.off + len(d)
		if matched > bestMatched || (matched == bestMatched && it.n.Seq > best.Seq) {
			best, bestMatched = it.n, matched
		}
		push(it.n.children, matched)
	}
	return best
}

// ParseRequest parses a request's messages, reusing b's stored message at
// the same index when the JSON is byte for byte the stored one.
func (t *Tree) ParseRequest(b *Branch, raws []json.RawMessage) ([]Message, error) {
	return parseMessages(raws, b.Active.Messages(), func(int, json.RawMessage) bool { return false })
}

// Prepare positions b for a request and returns the node it attaches at
// (nil: a new root) and the prompt ids: the node's ids joined with the
// increment of the request's messages past its path, or the whole
// rendering for a new root.
func (t *Tree) Prepare(c *Codec, b *Branch, req []Message, tools Tools, kw Kwargs, m Matcher) (*Node, []int, error) {
	if len(req) == 0 {
		return nil, nil, invalidf("messages must not be empty")
	}
	if len(t.nodes) >= MaxNodes {
		return nil, nil, errNodeCap()
	}
	at := t.attach(b, req, m)
	if at != nil {
		if err := extendable(at.rec.FinishReason, true); err != nil {
			return nil, nil, err
		}
	}
	b.Active = at
	if at == nil {
		prompt, err := limit(t.MaxTokens).check(c.renderIDs(req, tools, true, kw, t.MaxTokens))
		return nil, prompt, err
	}
	stored := at.Messages()
	prompt, err := extend(c, at.IDs(), stored, req[len(stored):], tools, kw, limit(t.MaxTokens))
	return at, prompt, err
}

func errNodeCap() error {
	return invalidf("node cap reached (%d): the session cannot branch or extend further — this almost always means the harness is not replaying history verbatim", MaxNodes)
}

// Commit records a turn under parent (the node Prepare attached the
// request at: concurrent turns from one node become siblings) for b,
// after the prefix invariant holds against the parent's ids, and moves b
// there.
func (t *Tree) Commit(b *Branch, parent *Node, req []Message, asst Message, rec Record, maxTrim int, responseID string) (*Node, error) {
	if len(t.nodes) >= MaxNodes {
		return nil, errNodeCap()
	}
	all := make([]int, 0, len(rec.PromptIDs)+len(rec.OutputIDs))
	all = append(append(all, rec.PromptIDs...), rec.OutputIDs...)
	prev := parent.IDs()
	if err := CheckPrefix(prev, all, maxTrim); err != nil {
		return nil, err
	}
	keep := 0
	for keep < len(prev) && keep < len(all) && prev[keep] == all[keep] {
		keep++
	}
	own := append([]int(nil), all[keep:]...) // not all's array: it holds the prefix again
	if t.MaxStored > 0 && t.stored+len(own) > t.MaxStored {
		return nil, fmt.Errorf("%w: the session's turns would hold %d ids, more than its limit %d", ErrTooLong, t.stored+len(own), t.MaxStored)
	}
	n := &Node{Seq: len(t.nodes), Parent: parent, Branch: b, ResponseID: responseID, keep: keep, own: own, promptLen: len(rec.PromptIDs),
		depth: parent.Depth() + 1, rec: rec}
	n.rec.PromptIDs, n.rec.OutputIDs = nil, nil
	pathMsgs := 0
	if parent != nil {
		pathMsgs = parent.nmsgs
	}
	n.delta = append(append(make([]Message, 0, len(req)-pathMsgs+1), req[min(pathMsgs, len(req)):]...), asst)
	n.nmsgs = pathMsgs + len(n.delta)
	t.nodes = append(t.nodes, n)
	if parent == nil {
		t.roots = append(t.roots, n)
	} else {
		parent.children = append(parent.children, n)
	}
	t.stored += len(own)
	b.Active = n
	return n, nil
}

// Linear is the path to n as a linear trajectory, for what reads one
// (records, samples, the mismatch check): its ids built anew, turn by turn.
func (n *Node) Linear() Trajectory {
	var t Trajectory
	path := n.Path()
	var prev []int
	for _, p := range path {
		ids := append(append(make([]int, 0, p.Len()), prev[:p.keep]...), p.own...)
		rec := p.rec
		rec.PromptIDs, rec.OutputIDs = ids[:p.promptLen:p.promptLen], ids[p.promptLen:]
		t.messages = append(t.messages, p.delta...)
		t.checkpoints = append(t.checkpoints, ids)
		t.ends = append(t.ends, p.nmsgs)
		t.records = append(t.records, rec)
		prev = ids
	}
	return t
}
