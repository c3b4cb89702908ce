package session

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/berth-sh/berth/internal/testing/chatref"
	"github.com/berth-sh/berth/internal/testing/hfref"
	"github.com/berth-sh/berth/session/samples"
	"github.com/berth-sh/berth/session/testengine"
	"github.com/berth-sh/berth/session/tito"
)

var agentTools = []any{
	map[string]any{"type": "function", "function": map[string]any{"name": "bash", "description": "Run a shell command in the sandbox.",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{
			"command": map[string]any{"type": "string"}, "timeout": map[string]any{"type": "number", "default": 30.5}},
			"required": []any{"command"}}}},
	map[string]any{"type": "function", "function": map[string]any{"name": "write_file", "description": "Write a file — UTF-8 ✓",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{
			"path": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"}}}}},
}

const finishPrompt = "Please finish now."

// agentScript is the model of the conversation tests: tool calls most of
// the time (sometimes two at once), a plain answer every fifth call, and a
// final answer with its reasoning when asked to finish. Every output names
// its session (tag) so that cross-talk would show.
func agentScript(tag func(testengine.Call) string) testengine.Script {
	return func(c testengine.Call) testengine.Reply {
		var msgs []map[string]any
		json.Unmarshal(c.Body["messages"], &msgs)
		if last := msgs[len(msgs)-1]; last["role"] == "user" && last["content"] == finishPrompt {
			return testengine.Reply{Text: fmt.Sprintf("<think>\nAll steps of %s are done.\n</think>\n\nFinished %s after %d calls.", tag(c), tag(c), c.N)}
		}
		cmd := func(k int) string {
			return fmt.Sprintf(`<tool_call>
{"name": "bash", "arguments": {"command": "echo %s step %d.%d && ls -la /tmp | head -n %d", "timeout": 1.5}}
</tool_call>`, tag(c), c.N, k, c.N%7+1)
		}
		switch {
		case c.N%5 == 0:
			return testengine.Reply{Text: fmt.Sprintf("Step %d for %s: the listing looks fine. 日本語 ✓ {\"ok\": true}", c.N, tag(c))}
		case c.N%3 == 0:
			return testengine.Reply{Text: fmt.Sprintf("Two things at once for %s.\n%s\n%s", tag(c), cmd(0), cmd(1))}
		case c.N%4 == 1:
			return testengine.Reply{Text: fmt.Sprintf(`<tool_call>
{"name": "write_file", "arguments": {"path": "/tmp/%s-%d.txt", "content": "line 1\nline 2 \"quoted\" \\ back\n\ttabbed"}}
</tool_call>`, tag(c), c.N)}
		}
		return testengine.Reply{Text: fmt.Sprintf("Running step %d.\n%s", c.N, cmd(0))}
	}
}

// toolResults answers an assistant message: one tool message per call, or
// a user message when it called none.
func toolResults(tag string, turn int, asst map[string]any) []any {
	calls, _ := asst["tool_calls"].([]any)
	if len(calls) == 0 {
		return []any{map[string]any{"role": "user", "content": fmt.Sprintf("Good, %s. Continue with turn %d.", tag, turn+1)}}
	}
	var out []any
	for k, c := range calls {
		id, _ := c.(map[string]any)["id"].(string)
		out = append(out, map[string]any{"role": "tool", "tool_call_id": id,
			"content": fmt.Sprintf("%s: output %d.%d\n  total 8\n-rw-r--r-- 1 root root  42 a.txt\n\n🙂 done", tag, turn, k)})
	}
	return out
}

type conversation struct {
	msgs  []any
	turns int
}

// run drives one session for turns turns (the last asks to finish),
// streaming on the given turns and retrying the given turns once.
func (e *testEnv) run(id, tag string, turns int, streamOn, retryOn func(int) bool) *conversation {
	return e.runT(e.t, id, tag, turns, streamOn, retryOn)
}

func (e *testEnv) runT(t testing.TB, id, tag string, turns int, streamOn, retryOn func(int) bool) *conversation {
	t.Helper()
	c := &conversation{msgs: []any{
		map[string]any{"role": "system", "content": "You are a careful agent. Use the tools."},
		map[string]any{"role": "user", "content": "Investigate /tmp for " + tag + " and report."},
	}}
	for turn := 1; turn <= turns; turn++ {
		if turn == turns {
			c.msgs = append(c.msgs, map[string]any{"role": "user", "content": finishPrompt})
		} else if turn == turns/2 {
			c.msgs = append(c.msgs, map[string]any{"role": "system", "content": "Reminder: be brief."})
		}
		asst := e.chatT(t, id, c.msgs, agentTools, streamOn(turn))
		if retryOn(turn) {
			// The agent retries the same request: the server rolls back the
			// turn it just recorded and records the new one.
			asst = e.chatT(t, id, c.msgs, agentTools, false)
		}
		c.msgs = append(c.msgs, asst)
		c.turns++
		if turn < turns {
			c.msgs = append(c.msgs, toolResults(tag, turn, asst)...)
		}
	}
	return c
}

// transcript parses a final transcript and the agent's tools as a
// request carries them.
func transcript(t testing.TB, c *tito.Codec, msgs []any) ([]tito.Message, tito.Tools, tito.Kwargs) {
	t.Helper()
	var parsed []tito.Message
	for _, m := range msgs {
		raw, _ := json.Marshal(m)
		pm, err := tito.ParseMessage(raw)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, pm)
	}
	rawTools, _ := json.Marshal(agentTools)
	tools, err := tito.ParseTools(rawTools)
	if err != nil {
		t.Fatal(err)
	}
	kw, err := c.MergeKwargs(nil)
	if err != nil {
		t.Fatal(err)
	}
	return parsed, tools, kw
}

// transcriptIDs is the tokenizer's rendering of a final transcript.
func transcriptIDs(t testing.TB, c *tito.Codec, msgs []any) []int {
	t.Helper()
	parsed, tools, kw := transcript(t, c, msgs)
	ids, err := c.RenderIDs(parsed, tools, false, kw)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestThirtyTurnConversation is the conversation line: 30 turns
// through the server and the test engine with tool calls and results, a
// retry (rollback), streaming turns; the accumulated ids equal the
// tokenizer's rendering of the final transcript, the three gated counters
// are 0, and the merged sample's loss mask is 1 exactly on output tokens.
func TestThirtyTurnConversation(t *testing.T) {
	e := newEnv(t, agentScript(func(testengine.Call) string { return "s30" }), testengine.Options{}, nil)
	id := e.create()
	const retryTurn = 17
	conv := e.run(id, "s30", 30, func(turn int) bool { return turn%4 == 2 }, func(turn int) bool { return turn == retryTurn })

	info, err := e.client.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Records) != 30 {
		t.Errorf("%d records, want 30 (the retried turn replaces its first try)", len(info.Records))
	}
	acc := info.Metadata.AccumulatedTokenIDs
	want := transcriptIDs(t, e.codec, conv.msgs)
	nl, _ := e.codec.Tok.Encode("\n")
	// The model stops at <|im_end|>; the template writes "\n" after it.
	if !slices.Equal(want, append(slices.Clone(acc), nl...)) {
		pos := firstDiff(want, acc)
		t.Fatalf("accumulated ids (%d) are not the transcript's rendering (%d) less its final newline; first difference at %d", len(acc), len(want), pos)
	}
	for _, typ := range tito.MismatchTypes {
		if n := info.Metadata.MismatchCounts[typ]; n != 0 {
			t.Errorf("%s = %d: %+v", typ, n, info.Metadata.Mismatch)
		}
	}

	// The rendering and tokenization agree with the trainer's renderer.
	t.Run("python reference", func(t *testing.T) { checkAgainstReference(t, e.codec, conv.msgs, want) })

	p, err := e.client.Samples(t.Context(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Samples) != 1 || p.EmptyReason != "" {
		t.Fatalf("%d samples, empty reason %q", len(p.Samples), p.EmptyReason)
	}
	s := p.Samples[0]
	if !slices.Equal(s.Tokens, acc) || s.Status != samples.Completed {
		t.Fatalf("merged tokens differ from the accumulated ids, or status %q", s.Status)
	}
	// Where the model's tokens are: each committed record's output, at the
	// position right after its prompt.
	recs := e.srv.recordsOf(t, id)
	isOutput := make([]bool, len(acc))
	logprob := make([]float64, len(acc))
	for _, r := range recs {
		for j, tok := range r.OutputIDs {
			p := len(r.PromptIDs) + j
			if acc[p] != tok {
				t.Fatalf("output token %d of a turn is not at its place in the accumulated ids", j)
			}
			isOutput[p], logprob[p] = true, testengine.LogProb(tok, j)
		}
	}
	start := len(acc) - s.ResponseLength
	if start != len(recs[0].PromptIDs) {
		t.Errorf("the response starts at %d, after the first prompt (%d)", start, len(recs[0].PromptIDs))
	}
	outputs := 0
	for i := start; i < len(acc); i++ {
		want := uint8(0)
		if isOutput[i] {
			want, outputs = 1, outputs+1
		}
		if s.LossMask[i-start] != want || s.RolloutLogProbs[i-start] != logprob[i] {
			t.Fatalf("position %d: mask %d logprob %v, want %d %v", i, s.LossMask[i-start], s.RolloutLogProbs[i-start], want, logprob[i])
		}
	}
	t.Logf("accumulated %d ids, %d output tokens, %d records", len(acc), outputs, len(recs))
	if outputs < 30*5 {
		t.Errorf("only %d output tokens", outputs)
	}
	// The engine saw the session's ids as input_ids, the routing key, and
	// no stream flag (the test engine refuses stream with meta info).
	calls := e.eng.Calls()
	if len(calls) != 31 {
		t.Errorf("%d engine calls, want 31 (30 turns and one retry)", len(calls))
	}
	for _, c := range calls {
		if c.RoutingKey != id {
			t.Fatalf("routing key %q, want the session id", c.RoutingKey)
		}
	}
	if !strings.Contains(string(mustJSON(info.Records[len(info.Records)-1].Request)), `"input_ids":[`) {
		t.Error("the record's request does not show input_ids")
	}
}

func firstDiff(a, b []int) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// recordsOf reads a session's committed records (test access).
func (s *Server) recordsOf(t testing.TB, id string) []tito.Record {
	s.mu.RLock()
	sess := s.sessions[id]
	s.mu.RUnlock()
	if sess == nil {
		t.Fatalf("no session %s", id)
	}
	snap := s.snapshot(sess)
	return snap.traj.Records()
}

// checkAgainstReference renders the final transcript with the trainer's
// renderer, Python jinja2 configured as transformers' apply_chat_template
// configures it (skipped without python3-jinja2): its text must be ours,
// and transformers.js (internal/testing/hfref, when installed) must
// tokenize it to our ids.
func checkAgainstReference(t *testing.T, c *tito.Codec, msgs []any, want []int) {
	src, special, err := chatref.HFTemplate(hfref.RequireQwen3(t))
	if err != nil {
		t.Fatal(err)
	}
	parsed, tools, kw := transcript(t, c, msgs)
	conv := chatref.Conversation{{K: "messages", V: msgs}, {K: "tools", V: agentTools}, {K: "add_generation_prompt", V: false}}
	for _, k := range slices.Sorted(maps.Keys(kw.JSON)) {
		conv = append(conv, chatref.Field{K: k, V: kw.JSON[k]})
	}
	cases, err := chatref.ChatCases(src, special, []chatref.Conversation{conv})
	if err != nil {
		t.Fatal(err)
	}
	answer := chatref.Python(t, cases)[0]
	if answer.OK == nil {
		t.Fatalf("the Python reference fails to render the transcript: %s", *answer.Err)
	}
	ours, err := c.Render(parsed, tools, false, kw)
	if err != nil {
		t.Fatal(err)
	}
	if ref := *answer.OK; ref != ours {
		i := 0
		for i < min(len(ref), len(ours)) && ref[i] == ours[i] {
			i++
		}
		from := max(i-40, 0)
		t.Fatalf("the Python reference renders the transcript differently from byte %d:\n ours %q\n ref  %q", i, ours[from:min(i+80, len(ours))], ref[from:min(i+80, len(ref))])
	}
	if !hfref.Available() {
		return
	}
	var js [][]int
	hfref.Run(t, "encode", []string{*answer.OK}, &js)
	if !slices.Equal(js[0], want) {
		t.Errorf("transformers.js tokenizes the reference's text to %d ids, we to %d; first difference at %d", len(js[0]), len(want), firstDiff(js[0], want))
	}
}
