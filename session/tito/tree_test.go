package tito

import (
	"errors"
	"slices"
	"testing"
)

// treeRig drives a tree with the GLM codec: a turn is Prepare, then a
// Commit of reply + <|observation|> (the stop token the next prompt drops:
// max_trim_tokens 1).
type treeRig struct {
	t    *testing.T
	c    *Codec
	kw   Kwargs
	tr   Tree
	stop string // the stop token a turn's output ends with
}

func newTreeRig(t *testing.T) *treeRig {
	c := glmCodec(t)
	kw, _ := c.MergeKwargs(nil)
	return &treeRig{t: t, c: c, kw: kw, stop: "<|observation|>"}
}

func (r *treeRig) turn(b *Branch, req []Message, reply, finish string, m Matcher) (*Node, Message) {
	r.t.Helper()
	parent, prompt, err := r.tr.Prepare(r.c, b, req, Tools{}, r.kw, m)
	if err != nil {
		r.t.Fatal(err)
	}
	a := msg(r.t, `{"role":"assistant","content":"`+reply+`"}`)
	out := ids(r.t, r.c, reply)
	if finish != "length" {
		out = append(out, ids(r.t, r.c, r.stop)...)
	}
	n, err := r.tr.Commit(b, parent, req, a, Record{PromptIDs: prompt, OutputIDs: out, LogProbs: make([]float64, len(out)), FinishReason: finish},
		r.c.MaxTrimTokens(), "resp-"+reply)
	if err != nil {
		r.t.Fatal(err)
	}
	return n, a
}

// TestTreeForkSharesPrefix: a fork at turn 2 of a 3-turn path attaches its
// next turn at turn 2 (not at the parent branch's turn 3, which its
// request does not replay), holds only its own ids, and each leaf's path
// reads back as a linear trajectory whose prefix is the shared turns'.
func TestTreeForkSharesPrefix(t *testing.T) {
	r := newTreeRig(t)
	root := r.tr.NewBranch("root")
	u := msg(t, `{"role":"user","content":"ls"}`)
	o1, o2 := msg(t, `{"role":"tool","content":"a.txt"}`), msg(t, `{"role":"tool","content":"b.txt"}`)
	n1, a1 := r.turn(root, []Message{u}, "one", "stop", Strict)
	r.stop = "<|user|>" // the next prompt renders <|observation|> there
	n2, a2 := r.turn(root, []Message{u, a1, o1}, "two", "stop", Strict)
	r.stop = "<|observation|>"
	n3, _ := r.turn(root, []Message{u, a1, o1, a2, o2}, "three", "stop", Strict)

	fork, err := r.tr.Fork(root, 2, "fork")
	if err != nil || fork.Base != n2 || fork.Active != n2 {
		t.Fatalf("fork: %v %+v", err, fork)
	}
	other := msg(t, `{"role":"tool","content":"c.txt"}`)
	f3, _ := r.turn(fork, []Message{u, a1, o1, a2, other}, "trois", "stop", Strict)
	if f3.Parent != n2 || f3.Branch != fork || f3.Seq != 3 {
		t.Fatalf("the fork's turn attached at %v (branch %s)", f3.Parent.Seq, f3.Branch.Name)
	}
	// The shared turns' ids are n2's but its last: GLM's join drops the
	// trailing <|user|> before the increment's <|observation|>
	// (max_trim_tokens 1), so each child keeps all but one of them.
	if f3.keep != n2.Len()-1 || n3.keep != n2.Len()-1 {
		t.Fatalf("keep %d and %d of %d", f3.keep, n3.keep, n2.Len())
	}
	if want := n1.OwnLen() + n2.OwnLen() + n3.OwnLen() + f3.OwnLen(); r.tr.Stored() != want || want >= len(n3.IDs())+len(f3.IDs()) {
		t.Fatalf("stored %d ids, want %d (the two paths are %d and %d)", r.tr.Stored(), want, len(n3.IDs()), len(f3.IDs()))
	}
	// Even replaying the fork's messages exactly, the first branch does not
	// see the fork's turn: it attaches at turn 2 and grows a sibling.
	n3b, _ := r.turn(root, []Message{u, a1, o1, a2, other}, "trois", "stop", Strict)
	if n3b.Parent != n2 || n3b.Branch != root {
		t.Fatalf("the first branch attached at %d", n3b.Parent.Seq)
	}
	if leaves := r.tr.Leaves(); len(leaves) != 3 || leaves[0] != n3 || leaves[1] != f3 || leaves[2] != n3b {
		t.Fatalf("leaves %v", leaves)
	}
	lin := f3.Linear()
	want := ids(t, r.c, "<|user|>ls<|assistant|>one<|observation|>a.txt<|assistant|>two<|observation|>c.txt<|assistant|>trois<|observation|>")
	if !slices.Equal(lin.Tokens(), want) || !slices.Equal(f3.IDs(), want) {
		t.Fatalf("fork path\n got %v\nwant %v", lin.Tokens(), want)
	}
	recs := lin.Records()
	if len(recs) != 3 || !slices.Equal(recs[2].OutputIDs, ids(t, r.c, "trois<|observation|>")) || len(lin.Messages()) != 6 ||
		!slices.Equal(recs[1].PromptIDs, n3.Linear().records[1].PromptIDs) {
		t.Fatalf("fork records %+v", recs)
	}
	if _, err := r.tr.Fork(root, 5, "x"); !errors.Is(err, ErrInvalid) {
		t.Errorf("fork past the path: %v", err)
	}
}

// TestTreeRetryAndConcurrentSiblings: a request that diverges two turns
// back is not refused (it branches there), and two turns prepared from one
// node commit as siblings.
func TestTreeRetryAndConcurrentSiblings(t *testing.T) {
	r := newTreeRig(t)
	b := r.tr.NewBranch("s")
	u := msg(t, `{"role":"user","content":"ls"}`)
	o1 := msg(t, `{"role":"tool","content":"a.txt"}`)
	n1, a1 := r.turn(b, []Message{u}, "one", "stop", Strict)
	_, a2 := r.turn(b, []Message{u, a1, o1}, "two", "stop", Strict)
	r.turn(b, []Message{u, a1, o1, a2, msg(t, `{"role":"tool","content":"b.txt"}`)}, "three", "stop", Strict)
	deep, _ := r.turn(b, []Message{u, a1, msg(t, `{"role":"tool","content":"edited"}`)}, "deux", "stop", Strict)
	if deep.Parent != n1 {
		t.Fatalf("a divergence two turns back attached at %v", deep.Parent)
	}
	req := []Message{u, a1, o1}
	p1, pr1, err1 := r.tr.Prepare(r.c, b, req, Tools{}, r.kw, Strict)
	p2, pr2, err2 := r.tr.Prepare(r.c, b, req, Tools{}, r.kw, Strict)
	if err1 != nil || err2 != nil || p1 != n1 || p2 != n1 || !slices.Equal(pr1, pr2) {
		t.Fatalf("prepares: %v %v", err1, err2)
	}
	for _, reply := range []string{"x", "y"} {
		out := ids(t, r.c, reply+"<|observation|>")
		if _, err := r.tr.Commit(b, p1, req, msg(t, `{"role":"assistant","content":"`+reply+`"}`), Record{PromptIDs: pr1, OutputIDs: out, LogProbs: make([]float64, len(out))}, 1, reply); err != nil {
			t.Fatal(err)
		}
	}
	if kids := n1.Children(); len(kids) != 4 || kids[2].ResponseID != "x" || kids[3].ResponseID != "y" {
		t.Fatalf("children of turn 1: %d", len(kids))
	}
}

// TestTreeMatcherModes is Miles's matcher wiring (tests/fast/router/
// test_session_message_matcher.py) on both versions: a replay whose tool
// arguments are re-serialized rolls a linear session back and branches a
// tree under strict, and extends both under loose_tool_call (the stored
// message stays authoritative); role_content_only also takes a replay
// without the tool calls.
func TestTreeMatcherModes(t *testing.T) {
	c := glmCodec(t)
	kw, _ := c.MergeKwargs(nil)
	u := msg(t, `{"role":"user","content":"q"}`)
	stored := msg(t, `{"role":"assistant","content":"","tool_calls":[{"id":"call-A","type":"function","function":{"name":"lookup","arguments":"{\"city\":\"Paris\",\"units\":\"metric\"}"}}]}`)
	respelled := msg(t, `{"role":"assistant","content":"","tool_calls":[{"id":"call-A","type":"function","function":{"name":"lookup","arguments":"{\"units\": \"metric\", \"city\": \"Paris\"}"}}]}`)
	bare := msg(t, `{"role":"assistant","content":"","reasoning_content":null}`)
	tool := msg(t, `{"role":"tool","content":"ok","tool_call_id":"call-A"}`)
	for _, tc := range []struct {
		m       Matcher
		replay  Message
		extends bool
	}{
		{Strict, respelled, false}, {LooseToolCall, respelled, true}, {RoleContentOnly, respelled, true},
		{LooseToolCall, bare, false}, {RoleContentOnly, bare, true},
	} {
		first, _ := c.RenderIDs([]Message{u}, Tools{}, true, kw)
		out := ids(t, c, "<|observation|>")
		rec := Record{PromptIDs: first, OutputIDs: out, LogProbs: []float64{0}}

		var lin Trajectory
		lin.Prepare(c, []Message{u}, Tools{}, kw, tc.m)
		lin.Commit([]Message{u}, stored, rec, 1)
		if _, err := lin.Prepare(c, []Message{u, tc.replay, tool}, Tools{}, kw, tc.m); err != nil {
			t.Fatal(err)
		}
		if got := lin.NumAssistant() == 1; got != tc.extends {
			t.Errorf("v1 %s: extended %v", tc.m, got)
		}
		if tc.extends && string(lin.Messages()[1].Raw) != string(stored.Raw) {
			t.Errorf("v1 %s: the replay replaced the stored message", tc.m)
		}

		var tr Tree
		b := tr.NewBranch("s")
		p, prompt, _ := tr.Prepare(c, b, []Message{u}, Tools{}, kw, tc.m)
		n, _ := tr.Commit(b, p, []Message{u}, stored, Record{PromptIDs: prompt, OutputIDs: out, LogProbs: []float64{0}}, 1, "")
		at, _, err := tr.Prepare(c, b, []Message{u, tc.replay, tool}, Tools{}, kw, tc.m)
		if err != nil || (at == n) != tc.extends || (!tc.extends && at != nil) {
			t.Errorf("v2 %s: attached at %v (%v)", tc.m, at, err)
		}
	}
}

// TestCutShortRefused: a tree path that ended at max_tokens is closed (its
// extension and a fork at it are refused, a retry before the cut is not);
// an engine-aborted turn is not continued in either version (Miles refuses
// partial rollouts), while retrying it is fine.
func TestCutShortRefused(t *testing.T) {
	r := newTreeRig(t)
	b := r.tr.NewBranch("s")
	u := msg(t, `{"role":"user","content":"ls"}`)
	cut, a1 := r.turn(b, []Message{u}, "on", "length", Strict)
	more := []Message{u, a1, msg(t, `{"role":"user","content":"go on"}`)}
	if _, _, err := r.tr.Prepare(r.c, b, more, Tools{}, r.kw, Strict); !errors.Is(err, ErrCutShort) || b.Active != cut {
		t.Fatalf("extending a length cut: %v", err)
	}
	if _, err := r.tr.Fork(b, 1, "f"); !errors.Is(err, ErrCutShort) {
		t.Fatalf("forking at a length cut: %v", err)
	}
	if at, _, err := r.tr.Prepare(r.c, b, []Message{u}, Tools{}, r.kw, Strict); err != nil || at != nil {
		t.Fatalf("retrying the cut turn: %v %v", at, err)
	}
	ab, a2 := r.turn(b, []Message{msg(t, `{"role":"user","content":"other"}`)}, "par", "abort", Strict)
	if _, _, err := r.tr.Prepare(r.c, b, []Message{msg(t, `{"role":"user","content":"other"}`), a2, u}, Tools{}, r.kw, Strict); !errors.Is(err, ErrCutShort) || ab.Children() != nil {
		t.Fatalf("extending an aborted turn in a tree: %v", err)
	}

	var lin Trajectory
	p, _ := lin.Prepare(r.c, []Message{u}, Tools{}, r.kw, Strict)
	out := ids(t, r.c, "par")
	lin.Commit([]Message{u}, a1, Record{PromptIDs: p, OutputIDs: out, LogProbs: make([]float64, len(out)), FinishReason: "abort"}, 1)
	if _, err := lin.Prepare(r.c, []Message{u, a1, msg(t, `{"role":"user","content":"go on"}`)}, Tools{}, r.kw, Strict); !errors.Is(err, ErrCutShort) {
		t.Fatalf("extending an aborted turn in a linear session: %v", err)
	}
	if _, err := lin.Prepare(r.c, []Message{u}, Tools{}, r.kw, Strict); err != nil || lin.NumAssistant() != 0 {
		t.Fatalf("retrying the aborted turn: %v", err)
	}
	// A linear session still extends a length cut, as Miles's v1 does.
	var cutLin Trajectory
	p, _ = cutLin.Prepare(r.c, []Message{u}, Tools{}, r.kw, Strict)
	cutLin.Commit([]Message{u}, a1, Record{PromptIDs: p, OutputIDs: out, LogProbs: make([]float64, len(out)), FinishReason: "length"}, 1)
	if _, err := cutLin.Prepare(r.c, []Message{u, a1, msg(t, `{"role":"user","content":"go on"}`)}, Tools{}, r.kw, Strict); err != nil {
		t.Fatalf("v1 extending a length cut: %v", err)
	}
}
