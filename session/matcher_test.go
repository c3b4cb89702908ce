package session

import (
	"encoding/json"
	"testing"

	"github.com/berth-sh/berth/session/testengine"
	"github.com/berth-sh/berth/session/tito"
)

// TestMatcherModesOnTheWire: Options.Matcher (--session-message-matcher)
// decides what a replayed assistant message is, in both versions. A
// harness that re-serializes tool arguments and drops the tool call's id
// is a different history under strict (a linear session rolls the turn
// back and records it again, a tree grows a new root), the same one under
// role_content_only; re-serialized arguments alone are the same under
// loose_tool_call. Where the replay matches, the stored message and its
// ids stay.
func TestMatcherModesOnTheWire(t *testing.T) {
	script := func(c testengine.Call) testengine.Reply {
		if c.N == 1 {
			return testengine.Reply{Text: "Looking.\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls -l\"}}\n</tool_call>"}
		}
		return testengine.Reply{Text: "Done."}
	}
	respell := func(a map[string]any, dropID bool) map[string]any {
		out := map[string]any{"role": "assistant", "content": a["content"]}
		var calls []map[string]any
		b, _ := json.Marshal(a["tool_calls"])
		json.Unmarshal(b, &calls)
		for _, c := range calls {
			fn := c["function"].(map[string]any)
			var args map[string]any
			json.Unmarshal([]byte(fn["arguments"].(string)), &args)
			compact, _ := json.Marshal(args)
			fn["arguments"] = string(compact)
			if dropID {
				c["id"] = "call_other"
			}
		}
		out["tool_calls"] = calls
		return out
	}
	for _, tc := range []struct {
		m       tito.Matcher
		dropID  bool
		matches bool
	}{
		{tito.Strict, false, false},
		{tito.LooseToolCall, false, true},
		{tito.LooseToolCall, true, false},
		{tito.RoleContentOnly, true, true},
	} {
		e := newEnv(t, script, testengine.Options{}, func(o *Options) { o.Matcher = tc.m })
		for _, tree := range []bool{false, true} {
			id := e.create()
			if tree {
				id, _ = e.client.CreateTree(t.Context())
			}
			u := map[string]any{"role": "user", "content": "list the files"}
			a1 := e.chat(id, []any{u}, agentTools, false)
			before, _ := e.client.Get(t.Context(), id)
			replay := respell(a1, tc.dropID)
			e.chat(id, []any{u, replay, map[string]any{"role": "tool", "tool_call_id": "call_1_0", "content": "a.txt"}}, agentTools, false)
			after, _ := e.client.Get(t.Context(), id)
			name := tc.m.String()
			if tree {
				nodes := after.Metadata.Tree.Nodes
				if extended := nodes[1].Parent != nil && *nodes[1].Parent == 0; extended != tc.matches {
					t.Errorf("%s, dropped id %v, v2: the replay extended the tree: %v", name, tc.dropID, extended)
				}
			} else if extended := len(after.Records) == 2; extended != tc.matches {
				t.Errorf("%s, dropped id %v, v1: the replay extended the session: %v", name, tc.dropID, extended)
			}
			if tc.matches {
				n := len(before.Metadata.AccumulatedTokenIDs)
				if got := after.Metadata.AccumulatedTokenIDs[:n]; string(mustJSON(got)) != string(mustJSON(before.Metadata.AccumulatedTokenIDs)) {
					t.Errorf("%s: the stored ids changed under a matching replay", name)
				}
			}
		}
	}
}
