package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/berth-sh/berth/session/samples"
	"github.com/berth-sh/berth/session/tito"
)

// Tree sessions, Miles's session server v2 (radixark/miles at
// 31f1ca961a94cb860cec3b2dea34ec332bfa8f76: miles/rollout/session/v2/,
// docs/user-guide/agentic-rollout.md "Choose the session behavior"), on
// the same routes as linear ones:
//
//   - POST /sessions {"version": "v2"} makes one (Options.Tree makes it
//     the default, and {"version": "v1"} a linear one then); its reply
//     says "version": "v2".
//   - a chat turn attaches at the deepest turn whose whole path of
//     messages prefixes the request's (tito.Tree); the rest becomes a new
//     branch, and nothing is removed. A path that ended at max_tokens is
//     closed: extending it is 409.
//   - GET /sessions/{id} shows the path the session is on (its records,
//     accumulated ids and mismatch) and metadata.tree: the node and leaf
//     tables (and berth's branches).
//   - POST /sessions/{id}/samples {"max_seq_len"?, "metadata"?} returns one
//     sample per leaf: each leaf's turns assembled as a linear session's,
//     the leaves a retry superseded dropped, a completion shared by several
//     leaves trainable (loss mask 1) in the earliest only, the metadata's
//     fields under the server's, its "reward" as each sample's reward (the
//     v2 wire carries "reward"); each sample's metadata has its "leaf",
//     accumulated_token_ids and tito_session_mismatch.
//
// berth adds explicit forks: POST /sessions/{id}/fork {"turn": k} makes a
// new session id on the same tree whose path is the first k turns of the
// session's current path; its turns attach among its own and that path,
// never at another branch's, so N branches of one prefix grow N leaves
// that share the prefix's ids. The samples op of any of a tree's sessions
// returns all its leaves; {"branches": {"<session id>": {...}}} adds
// metadata (a branch's reward) to the leaves of one branch. Deleting one
// of a tree's sessions leaves the tree to the others.

// MaxTreeFactor bounds a tree: its turns hold at most MaxTreeFactor x
// MaxSessionTokens ids in all.
const MaxTreeFactor = 8

func (s *Server) treeRoutes(m *http.ServeMux) {
	m.HandleFunc("POST /sessions/{id}/fork", s.auth(s.fork))
}

// wantsTree reads POST /sessions' optional body {"version": "v1"|"v2"}.
func (s *Server) wantsTree(w http.ResponseWriter, r *http.Request) (bool, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
	if err != nil {
		return false, fmt.Errorf("reading the body: %w", err)
	}
	var req struct {
		Version string `json:"version"`
	}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			return false, fmt.Errorf("invalid JSON body: %w", err)
		}
	}
	switch req.Version {
	case "":
		return s.opts.Tree, nil
	case "v1":
		return false, nil
	case "v2":
		return true, nil
	}
	return false, fmt.Errorf("version %q: want v1 (linear) or v2 (tree)", req.Version)
}

func (s *Server) fork(w http.ResponseWriter, r *http.Request) {
	sess := s.lookup(w, r)
	if sess == nil {
		return
	}
	if sess.tree == nil {
		writeError(w, http.StatusBadRequest, "session "+sess.id+" is linear (v1): only a tree session (POST /sessions {\"version\": \"v2\"}) forks")
		return
	}
	var req struct {
		Turn *int `json:"turn"`
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil || req.Turn == nil {
		writeError(w, http.StatusBadRequest, `the body must be {"turn": k}, the number of turns the fork keeps`)
		return
	}
	if err := sess.ab.err(); err != nil {
		s.refuse(w, err)
		return
	}
	sess.mu.Lock()
	var b *tito.Branch
	if sess.closing.Load() {
		err = gone(sess.id)
	} else {
		b, err = sess.tree.Fork(sess.branch, *req.Turn, newID())
	}
	sess.mu.Unlock()
	if err != nil {
		s.refuse(w, err)
		return
	}
	child := &session{id: b.Name, mu: sess.mu, tree: sess.tree, branch: b}
	if !s.add(w, child) {
		return // the branch has no turns and no handle: it stays inert in the tree
	}
	reply := map[string]any{"session_id": child.id, "parent_session_id": sess.id, "turn": *req.Turn, "node_id": nil, "version": "v2"}
	if b.Base != nil {
		reply["node_id"] = b.Base.Seq
	}
	if s.opts.ExternalURL != "" {
		reply["base_url"] = s.opts.ExternalURL + "/sessions/" + child.id + "/v1"
	}
	writeJSON(w, http.StatusOK, reply)
}

// treeTable is the tree's tables (under its lock).
func treeTable(t *tito.Tree) samples.Tree {
	tbl := samples.Tree{Nodes: []samples.TreeNode{}, Leaves: []samples.TreeLeaf{}, Branches: []samples.TreeBranch{}}
	for _, n := range t.Nodes() {
		start, end := n.CompletionSpan()
		tbl.Nodes = append(tbl.Nodes, samples.TreeNode{ID: n.Seq, Parent: seqOf(n.Parent), Seq: n.Seq, Truncated: n.Truncated(), CommittedAt: n.CommittedAt(),
			CompletionSpan: [2]int{start, end}, NumTokens: n.Len(), ResponseID: n.ResponseID, Branch: n.Branch.Name, FinishReason: n.FinishReason()})
	}
	for _, n := range t.Leaves() {
		tbl.Leaves = append(tbl.Leaves, samples.TreeLeaf{NodeID: n.Seq, PathNodeIDs: pathIDs(n), Branch: n.Branch.Name})
	}
	for _, b := range t.Branches() {
		tb := samples.TreeBranch{SessionID: b.Name, ForkNodeID: seqOf(b.Base), AbortReason: b.AbortReason}
		if b.Parent != nil {
			tb.Parent = b.Parent.Name
		}
		tbl.Branches = append(tbl.Branches, tb)
	}
	return tbl
}

func seqOf(n *tito.Node) *int {
	if n == nil {
		return nil
	}
	seq := n.Seq
	return &seq
}

func pathIDs(n *tito.Node) []int {
	path := n.Path()
	ids := make([]int, len(path))
	for i, p := range path {
		ids[i] = p.Seq
	}
	return ids
}

// treeParams is a tree session's samples body.
type treeParams struct {
	samplesParams
	// Metadata is the agent's (Miles's agent_metadata): under the
	// server's keys in every sample, its "reward" their reward.
	Metadata map[string]any `json:"metadata"`
	// Branches adds metadata to the leaves of one branch (by session id),
	// over Metadata: berth's per-branch reward.
	Branches map[string]map[string]any `json:"branches"`
}

// leafOf is what a leaf's sample needs of the tree, taken under its lock.
type leafOf struct {
	node  *tito.Node
	leaf  samples.Leaf
	abort string
}

func (s *Server) treeSamples(w http.ResponseWriter, r *http.Request, sess *session, body []byte) {
	var params treeParams
	if !readSamplesBody(w, body, &params, &params.samplesParams) {
		return
	}
	sess.mu.Lock()
	active, tbl := sess.branch.Active, treeTable(sess.tree)
	var leaves []leafOf
	weight := int64(0)
	for _, n := range sess.tree.Leaves() {
		leaves = append(leaves, leafOf{node: n, abort: n.Branch.AbortReason, leaf: samples.Leaf{NodeID: n.Seq, Parent: seqOf(n.Parent),
			PathNodeIDs: pathIDs(n), ResponseID: n.ResponseID, Branch: n.Branch.Name}})
		weight += 4 * int64(n.Len())
	}
	sess.mu.Unlock()
	snap := snapshot{traj: active.Linear(), tree: &tbl, abort: sess.ab.reasonOf()}
	md, ok := s.checked(w, r, snap)
	if !ok {
		return
	}
	md.Agent = params.Metadata
	p := &samples.Payload{V2: true}
	var ls []samples.LeafSample
	var err error
	if len(leaves) > 0 {
		if werr := s.bounds.tokenize(r.Context(), weight, func() { ls, err = s.leafSamples(leaves, params.MaxSeqLen) }); werr != nil {
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, "gave up waiting to tokenize: "+werr.Error())
			return
		}
	}
	if err != nil {
		writeAssembly(w, err)
		return
	}
	ls = samples.DropRetries(ls, tbl)
	samples.OwnShared(ls, tbl)
	aborts := map[string]string{}
	for _, l := range leaves {
		aborts[l.leaf.Branch] = l.abort
	}
	for _, l := range ls {
		l.WithAgent(merged(params.Metadata, params.Branches[l.Leaf.Branch]))
		markAborted(&l.Sample, aborts[l.Leaf.Branch])
		p.Samples = append(p.Samples, l.Sample)
	}
	switch {
	case len(leaves) == 0:
		p.EmptyReason = samples.NoRecords
	case len(p.Samples) == 0:
		p.EmptyReason = samples.AllTruncated
	}
	p.SessionMetadata = mustJSON(md)
	s.writePayload(w, r, sess, p, md)
}

// leafSamples assembles one sample per leaf (a leaf whose turns all
// truncate away has none), with the server's metadata keys.
func (s *Server) leafSamples(leaves []leafOf, maxSeqLen *int) ([]samples.LeafSample, error) {
	var out []samples.LeafSample
	for _, l := range leaves {
		traj := l.node.Linear()
		smp, ok, err := s.merge(&traj, maxSeqLen)
		if err != nil {
			return nil, fmt.Errorf("leaf %d: %w", l.leaf.NodeID, err)
		}
		if !ok {
			continue
		}
		if smp.Metadata == nil {
			smp.Metadata = map[string]any{}
		}
		smp.Metadata["leaf"] = l.leaf
		smp.Metadata["accumulated_token_ids"] = traj.Tokens()
		ms, merr := s.opts.Codec.SessionMismatch(&traj)
		if merr != nil {
			smp.Metadata["mismatch_error"] = merr.Error()
		} else if ms != nil {
			smp.Metadata["tito_session_mismatch"] = ms
		}
		smp.Metadata["mismatch_counts"] = tito.Counts(ms)
		out = append(out, samples.LeafSample{Sample: smp, Leaf: l.leaf})
	}
	return out, nil
}

// merged is base with over's keys laid on it (nil when both are).
func merged(base, over map[string]any) map[string]any {
	if over == nil {
		return base
	}
	out := make(map[string]any, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}
