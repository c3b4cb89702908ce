package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
)

func upstreamf(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrUpstream, fmt.Sprintf(format, a...))
}

type choiceJSON struct {
	Message      json.RawMessage `json:"message"`
	FinishReason *string         `json:"finish_reason"`
	MetaInfo     *struct {
		OutputTokenLogprobs [][]json.RawMessage `json:"output_token_logprobs"`
		CompletionTokens    *int                `json:"completion_tokens"`
		PromptTokens        int                 `json:"prompt_tokens"`
		CachedTokens        int                 `json:"cached_tokens"`
		WeightVersion       json.RawMessage     `json:"weight_version"`
		E2ELatency          *float64            `json:"e2e_latency"`
		FinishReason        json.RawMessage     `json:"finish_reason"`
	} `json:"meta_info"`
	TokenIDs []int `json:"token_ids"`
	Logprobs *struct {
		Content []struct {
			Logprob float64 `json:"logprob"`
		} `json:"content"`
	} `json:"logprobs"`
}

type responseJSON struct {
	Choices        []choiceJSON `json:"choices"`
	PromptTokenIDs []int        `json:"prompt_token_ids"`
	Usage          *struct {
		PromptTokens        int `json:"prompt_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

// parseChat fills the parsed fields of a 200 reply, or says why the reply
// is not what the dialect promises.
func parseChat(c *Completion, d Dialect) error {
	if err := json.Unmarshal(c.Body, &c.Response); err != nil || c.Response == nil {
		return upstreamf("the engine's reply is not a JSON object")
	}
	var r responseJSON
	if err := json.Unmarshal(c.Body, &r); err != nil {
		return upstreamf("the engine's reply does not parse: %v", err)
	}
	if len(r.Choices) == 0 {
		return upstreamf("the engine's reply has no choices")
	}
	ch := r.Choices[0]
	var msg struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(ch.Message, &msg); err != nil || len(bytes.TrimSpace(ch.Message)) == 0 || ch.Message[0] != '{' {
		return upstreamf("choices[0].message is missing or not an object")
	}
	if msg.Content == nil {
		return upstreamf("choices[0].message.content is null (the engine must return \"\" when it parsed only tool calls)")
	}
	c.Message = ch.Message
	if ch.FinishReason != nil {
		c.FinishReason = *ch.FinishReason
	}
	switch d {
	case SGLang:
		m := ch.MetaInfo
		if m == nil || m.OutputTokenLogprobs == nil {
			return upstreamf("meta_info.output_token_logprobs missing from choices[0] (does the engine honour logprobs and return_meta_info?)")
		}
		if m.CompletionTokens == nil || len(m.OutputTokenLogprobs) != *m.CompletionTokens {
			return upstreamf("len(output_token_logprobs)=%d differs from completion_tokens", len(m.OutputTokenLogprobs))
		}
		for i, e := range m.OutputTokenLogprobs {
			if len(e) < 2 {
				return upstreamf("output_token_logprobs[%d] is not [logprob, token_id, text]", i)
			}
			var lp float64
			var id int
			if json.Unmarshal(e[0], &lp) != nil {
				lp = 0 // null for the first token of some engines: no logprob known
			}
			if err := json.Unmarshal(e[1], &id); err != nil || id < 0 {
				return upstreamf("output_token_logprobs[%d] has no token id", i)
			}
			c.OutputIDs = append(c.OutputIDs, id)
			c.LogProbs = append(c.LogProbs, lp)
		}
		c.Meta.PromptTokens, c.Meta.CachedTokens, c.Meta.E2ELatency = m.PromptTokens, m.CachedTokens, m.E2ELatency
		var wv any
		if json.Unmarshal(m.WeightVersion, &wv) == nil && wv != nil {
			c.Meta.WeightVersion = fmt.Sprint(wv)
		}
	case VLLM:
		if ch.TokenIDs == nil || r.PromptTokenIDs == nil {
			return upstreamf("token_ids or prompt_token_ids missing (does the engine honour return_token_ids?)")
		}
		if ch.Logprobs == nil || len(ch.Logprobs.Content) != len(ch.TokenIDs) {
			return upstreamf("choices[0].logprobs.content does not have one entry per token id")
		}
		c.OutputIDs, c.PromptIDs = ch.TokenIDs, r.PromptTokenIDs
		for _, e := range ch.Logprobs.Content {
			c.LogProbs = append(c.LogProbs, e.Logprob)
		}
		if r.Usage != nil {
			c.Meta.PromptTokens = r.Usage.PromptTokens
			if r.Usage.PromptTokensDetails != nil {
				c.Meta.CachedTokens = r.Usage.PromptTokensDetails.CachedTokens
			}
		}
	case OpenAI:
		c.TextOnly = true
		if r.Usage != nil {
			c.Meta.PromptTokens = r.Usage.PromptTokens
		}
	}
	return nil
}
