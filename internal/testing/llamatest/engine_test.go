package llamatest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"testing"

	"github.com/berth-sh/berth/internal/testing/qwen3test"
)

// post sends one chat request to the engine and returns its status and body.
func post(e *Engine, key string, body map[string]any) (int, []byte, error) {
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, e.URL+"/v1/chat/completions", bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("X-SMG-Routing-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// rawTurn sends prompt ids to the engine as the session server does.
func rawTurn(e *Engine, key string, ids []int, extra map[string]any) (Reply, error) {
	body := map[string]any{"input_ids": ids, "messages": []any{}}
	for k, v := range extra {
		body[k] = v
	}
	status, out, err := post(e, key, body)
	if err != nil {
		return Reply{}, err
	}
	if status != http.StatusOK {
		return Reply{}, fmt.Errorf("engine: %d %s", status, out)
	}
	return ParseReply(out)
}

func turn(t testing.TB, e *Engine, key string, ids []int, extra map[string]any) Reply {
	t.Helper()
	rep, err := rawTurn(e, key, ids, extra)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestEngineDialect: the engine answers in SGLang's dialect with what a
// real model does: one logprob per output id (a log probability: at most
// 0), a turn that stops ends with <|im_end|> and its content is the text
// of the ids before it; a turn cut at max_tokens has exactly max_tokens
// ids and no <|im_end|>; a session's second turn reuses the evaluated
// prefix (cached_tokens); a seed fixes the sample, in any session.
func TestEngineDialect(t *testing.T) {
	c := qwen3test.Codec(t)
	e := Start(t, Options{Sequences: 2})
	eos, _ := c.Tok.TokenID("<|im_end|>")
	prompt, _ := c.Tok.Encode("<|im_start|>user\nTell me a story.<|im_end|>\n<|im_start|>assistant\n")

	var stopped, cut bool
	for seed := 1; seed <= 20 && !(stopped && cut); seed++ {
		rep := turn(t, e, "", prompt, map[string]any{"max_tokens": 12, "seed": seed})
		for _, lp := range rep.LogProbs {
			if lp > 0 || math.IsNaN(lp) || math.IsInf(lp, 0) {
				t.Fatalf("logprob %v", lp)
			}
		}
		n := len(rep.OutputIDs)
		switch rep.FinishReason {
		case "stop":
			stopped = true
			if rep.OutputIDs[n-1] != eos || slices.Contains(rep.OutputIDs[:n-1], eos) {
				t.Fatalf("a stopped turn's ids %v", rep.OutputIDs)
			}
			if text, _ := c.Tok.Decode(rep.OutputIDs[:n-1], true); text != rep.Content {
				t.Fatalf("content %q, ids decode to %q", rep.Content, text)
			}
		case "length":
			cut = true
			if n != 12 || slices.Contains(rep.OutputIDs, eos) {
				t.Fatalf("a cut turn has %d ids: %v", n, rep.OutputIDs)
			}
		default:
			t.Fatalf("finish_reason %q", rep.FinishReason)
		}
	}
	if !stopped || !cut {
		t.Fatalf("20 seeds: stopped %v, cut %v", stopped, cut)
	}

	first := turn(t, e, "s1", prompt, map[string]any{"max_tokens": 8, "seed": 5})
	again := turn(t, e, "s2", prompt, map[string]any{"max_tokens": 8, "seed": 5})
	if !slices.Equal(first.OutputIDs, again.OutputIDs) || !slices.Equal(first.LogProbs, again.LogProbs) {
		t.Fatalf("same seed, two sessions: %+v %+v", first, again)
	}
	next := append(append(slices.Clone(prompt), first.OutputIDs...), eos)
	user, _ := c.Tok.Encode("\n<|im_start|>user\nAnd then?<|im_end|>\n<|im_start|>assistant\n")
	next = append(next, user...)
	second := turn(t, e, "s1", next, map[string]any{"max_tokens": 4})
	if second.PromptTokens != len(next) || second.CachedTokens < len(prompt) {
		t.Fatalf("second turn: %d prompt tokens, %d cached (first prompt %d)", second.PromptTokens, second.CachedTokens, len(prompt))
	}
	if status, out, _ := post(e, "", map[string]any{"input_ids": []int{1 << 30}}); status != http.StatusBadRequest {
		t.Fatalf("an id past the vocabulary: %d %s", status, out)
	}
}
