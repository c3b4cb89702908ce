package llamatest

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/x448/float16"
)

// Params shape the generated model. The zero value of a field takes the
// default in DefaultParams.
type Params struct {
	Layers  int // transformer blocks
	Embed   int // hidden size
	Heads   int // attention heads
	KVHeads int // key/value heads (grouped-query attention)
	HeadDim int
	FFN     int // feed-forward size
	Context int // the context length the file declares
	Seed    uint64
	// StopLogit is <|im_end|>'s logit, an average token's being 0: the
	// log of the stop probability is about StopLogit - ln(vocabulary) -
	// Spread^2/2 (11.5 with Qwen3's 151,669 tokens and Spread 2: about
	// one stop in ten tokens, as measured).
	StopLogit float64
	// Spread is the standard deviation of an ordinary token's logit: how
	// far from uniform the model's choices are.
	Spread float64
}

// DefaultParams is the tier's model: 2 blocks of Qwen3's shape, small
// enough that two cores generate about a hundred tokens a second.
var DefaultParams = Params{Layers: 2, Embed: 32, Heads: 2, KVHeads: 1, HeadDim: 16, FFN: 64, Context: 8192, Seed: 1, StopLogit: 11.5, Spread: 2}

func (p Params) withDefaults() Params {
	d := DefaultParams
	for _, f := range []struct{ v, def *int }{{&p.Layers, &d.Layers}, {&p.Embed, &d.Embed}, {&p.Heads, &d.Heads}, {&p.KVHeads, &d.KVHeads},
		{&p.HeadDim, &d.HeadDim}, {&p.FFN, &d.FFN}, {&p.Context, &d.Context}} {
		if *f.v == 0 {
			*f.v = *f.def
		}
	}
	if p.Seed == 0 {
		p.Seed = d.Seed
	}
	if p.StopLogit == 0 {
		p.StopLogit = d.StopLogit
	}
	if p.Spread == 0 {
		p.Spread = d.Spread
	}
	return p
}

// vocab is a Hugging Face BPE tokenizer as GGUF's tokenizer.ggml keys hold
// it, with the ids the model needs.
type vocab struct {
	tokens   []string
	types    []int32
	merges   []string
	eos, pad int
	template string
}

// GGUF token types.
const (
	tokNormal      = 1
	tokControl     = 3
	tokUserDefined = 4
	tokUnused      = 5
)

// readVocab reads tokenizer.json and tokenizer_config.json from dir the way
// llama.cpp's convert_hf_to_gguf.py does for a GPT-2-style BPE: every id
// in order (a gap becomes an unused [PADn] token), added tokens that are
// special or look like <|...|> as control tokens, the other added tokens
// as user-defined, merges as "left right".
func readVocab(dir string) (*vocab, error) {
	var tj struct {
		Model struct {
			Type   string            `json:"type"`
			Vocab  map[string]int    `json:"vocab"`
			Merges []json.RawMessage `json:"merges"`
		} `json:"model"`
		Added []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens"`
	}
	var cfg struct {
		ChatTemplate string `json:"chat_template"`
		EOS          string `json:"eos_token"`
		Pad          string `json:"pad_token"`
	}
	if err := readJSON(filepath.Join(dir, "tokenizer.json"), &tj); err != nil {
		return nil, err
	}
	if err := readJSON(filepath.Join(dir, "tokenizer_config.json"), &cfg); err != nil {
		return nil, err
	}
	if tj.Model.Type != "BPE" {
		return nil, fmt.Errorf("llamatest: tokenizer model %q, want BPE", tj.Model.Type)
	}
	n := 0
	for _, id := range tj.Model.Vocab {
		n = max(n, id+1)
	}
	for _, a := range tj.Added {
		n = max(n, a.ID+1)
	}
	v := &vocab{tokens: make([]string, n), types: make([]int32, n), template: cfg.ChatTemplate, eos: -1, pad: -1}
	for tok, id := range tj.Model.Vocab {
		v.tokens[id], v.types[id] = tok, tokNormal
	}
	for _, a := range tj.Added {
		v.tokens[a.ID], v.types[a.ID] = a.Content, tokUserDefined
		if a.Special || strings.HasPrefix(a.Content, "<|") && strings.HasSuffix(a.Content, "|>") {
			v.types[a.ID] = tokControl
		}
		switch a.Content {
		case cfg.EOS:
			v.eos = a.ID
		case cfg.Pad:
			v.pad = a.ID
		}
	}
	for id := range v.tokens {
		if v.types[id] == 0 {
			v.tokens[id], v.types[id] = fmt.Sprintf("[PAD%d]", id), tokUnused
		}
	}
	if v.eos < 0 {
		return nil, fmt.Errorf("llamatest: eos_token %q is not an added token", cfg.EOS)
	}
	for _, m := range tj.Model.Merges {
		var pair []string
		var s string
		switch {
		case json.Unmarshal(m, &s) == nil:
			v.merges = append(v.merges, s)
		case json.Unmarshal(m, &pair) == nil && len(pair) == 2:
			v.merges = append(v.merges, pair[0]+" "+pair[1])
		default:
			return nil, fmt.Errorf("llamatest: merge %s is neither \"a b\" nor [a, b]", m)
		}
	}
	return v, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// writeQwen3 writes a GGUF of Qwen3's architecture with the tokenizer of
// dir and random weights from p.Seed.
//
// A model with plain random weights over 151k tokens never ends a turn
// and writes control tokens (<|im_start|>, <|endoftext|>) as often as any
// other token, which no trained model does; such degenerate output would
// make the tests' TITO checks fail on the model, not on the session
// server. So hidden dimension 0 is a constant channel: every token
// embedding holds 1 there and every norm passes it, so after the final
// norm it is nearly the same at every position and the output matrix's
// column 0 acts as a per-token bias. <|im_end|> gets StopLogit there, the other control and
// user-defined tokens (<think>, <tool_call>) a large negative bias;
// ordinary tokens get 0 and random weights in the other dimensions, so
// what the model says depends on the context it reads.
func writeQwen3(w io.Writer, dir string, p Params) error {
	p = p.withDefaults()
	v, err := readVocab(dir)
	if err != nil {
		return err
	}
	g := &gguf{}
	qwen3Metadata(g, v, p)
	rng := rand.New(rand.NewPCG(p.Seed, 0x9e3779b97f4a7c15))
	n := len(v.tokens)
	e := p.Embed
	embd := make([]float32, n*e)
	for t := range n {
		embd[t*e] = 1
		for i := 1; i < e; i++ {
			embd[t*e+i] = float32(rng.NormFloat64() * embedSpread)
		}
	}
	g.tensor("token_embd.weight", typeF16, f16(embd), uint64(e), uint64(n))
	g.tensor("output_norm.weight", typeF32, f32(ones(e)), uint64(e))
	g.tensor("output.weight", typeF16, f16(outputWeights(rng, v, p)), uint64(e), uint64(n))
	q, kv := p.Heads*p.HeadDim, p.KVHeads*p.HeadDim
	for l := range p.Layers {
		b := fmt.Sprintf("blk.%d.", l)
		g.tensor(b+"attn_norm.weight", typeF32, f32(ones(e)), uint64(e))
		g.tensor(b+"attn_q.weight", typeF16, f16(normal(rng, e*q, 0.2)), uint64(e), uint64(q))
		g.tensor(b+"attn_k.weight", typeF16, f16(normal(rng, e*kv, 0.2)), uint64(e), uint64(kv))
		g.tensor(b+"attn_v.weight", typeF16, f16(normal(rng, e*kv, 0.2)), uint64(e), uint64(kv))
		g.tensor(b+"attn_output.weight", typeF16, f16(normal(rng, q*e, 0.02)), uint64(q), uint64(e))
		g.tensor(b+"attn_q_norm.weight", typeF32, f32(ones(p.HeadDim)), uint64(p.HeadDim))
		g.tensor(b+"attn_k_norm.weight", typeF32, f32(ones(p.HeadDim)), uint64(p.HeadDim))
		g.tensor(b+"ffn_norm.weight", typeF32, f32(ones(e)), uint64(e))
		g.tensor(b+"ffn_gate.weight", typeF16, f16(normal(rng, e*p.FFN, 0.2)), uint64(e), uint64(p.FFN))
		g.tensor(b+"ffn_up.weight", typeF16, f16(normal(rng, e*p.FFN, 0.2)), uint64(e), uint64(p.FFN))
		g.tensor(b+"ffn_down.weight", typeF16, f16(normal(rng, p.FFN*e, 0.02)), uint64(p.FFN), uint64(e))
	}
	_, err = g.WriteTo(w)
	return err
}

// embedSpread is the standard deviation of a token embedding's dimensions
// other than the constant channel.
const embedSpread = 0.25

// outputWeights is the output matrix, row t the weights of token t's
// logit; column 0 reads the constant channel (see writeQwen3).
func outputWeights(rng *rand.Rand, v *vocab, p Params) []float32 {
	e := p.Embed
	// After the final RMS norm the channel is about sqrt(e / (1 +
	// (e-1)s^2)) and every other dimension about s times that (s is
	// embedSpread; the blocks add little to the residual).
	channel := math.Sqrt(float64(e) / (1 + float64(e-1)*embedSpread*embedSpread))
	sd := p.Spread / (embedSpread * channel * math.Sqrt(float64(e-1)))
	out := make([]float32, len(v.tokens)*e)
	for t := range v.tokens {
		row := out[t*e : (t+1)*e]
		switch {
		case t == v.eos:
			row[0] = float32(p.StopLogit / channel)
		case v.types[t] != tokNormal:
			row[0] = float32(-40 / channel)
		}
		for i := 1; i < e; i++ {
			row[i] = float32(rng.NormFloat64() * sd)
		}
	}
	return out
}

// qwen3Metadata writes the keys llama.cpp reads for architecture qwen3,
// with the names convert_hf_to_gguf.py gives them.
func qwen3Metadata(g *gguf, v *vocab, p Params) {
	g.str("general.architecture", "qwen3")
	g.str("general.type", "model")
	g.str("general.name", fmt.Sprintf("berth tiny qwen3 %dx%d seed %d", p.Layers, p.Embed, p.Seed))
	g.u32("general.file_type", 1) // mostly F16
	g.u32("qwen3.block_count", uint32(p.Layers))
	g.u32("qwen3.context_length", uint32(p.Context))
	g.u32("qwen3.embedding_length", uint32(p.Embed))
	g.u32("qwen3.feed_forward_length", uint32(p.FFN))
	g.u32("qwen3.attention.head_count", uint32(p.Heads))
	g.u32("qwen3.attention.head_count_kv", uint32(p.KVHeads))
	g.u32("qwen3.attention.key_length", uint32(p.HeadDim))
	g.u32("qwen3.attention.value_length", uint32(p.HeadDim))
	g.f32("qwen3.rope.freq_base", 1e6)
	g.f32("qwen3.attention.layer_norm_rms_epsilon", 1e-6)
	g.str("tokenizer.ggml.model", "gpt2")
	g.str("tokenizer.ggml.pre", "qwen2")
	g.strs("tokenizer.ggml.tokens", v.tokens)
	g.i32s("tokenizer.ggml.token_type", v.types)
	g.strs("tokenizer.ggml.merges", v.merges)
	g.u32("tokenizer.ggml.eos_token_id", uint32(v.eos))
	if v.pad >= 0 {
		g.u32("tokenizer.ggml.padding_token_id", uint32(v.pad))
		g.u32("tokenizer.ggml.bos_token_id", uint32(v.pad)) // Qwen3's config.json: bos_token_id 151643
	}
	g.flag("tokenizer.ggml.add_bos_token", false)
	if v.template != "" {
		g.str("tokenizer.chat_template", v.template)
	}
}

func ones(n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = 1
	}
	return out
}

func normal(rng *rand.Rand, n int, sd float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(rng.NormFloat64() * sd)
	}
	return out
}

func f16(xs []float32) []byte {
	out := make([]byte, 2*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint16(out[2*i:], float16.Fromfloat32(x).Bits())
	}
	return out
}

func f32(xs []float32) []byte {
	out := make([]byte, 4*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
	}
	return out
}
