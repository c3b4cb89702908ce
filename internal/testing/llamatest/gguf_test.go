package llamatest

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
)

// readBack reads a GGUF file with node-llama-cpp's reader (ggufinfo.mjs).
func readBack(t *testing.T, path string) (info struct {
	Version     int            `json:"version"`
	TensorCount int            `json:"tensorCount"`
	Metadata    map[string]any `json:"metadata"`
	Tensors     []struct {
		Name       string   `json:"name"`
		Dimensions []uint64 `json:"dimensions"`
		Type       uint32   `json:"type"`
		Offset     uint64   `json:"offset"`
		Data       string   `json:"data"`
	} `json:"tensors"`
}) {
	t.Helper()
	cmd := exec.Command(RequireNode(t), "ggufinfo.mjs", path)
	cmd.Dir = Dir()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ggufinfo.mjs: %v %s", err, out)
	}
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatal(err)
	}
	return info
}

// TestGGUFReadBack: what the writer writes, llama.cpp's JavaScript reader
// reads back: every metadata type the model uses, tensors of both types
// with their shapes, offsets aligned to 32 bytes, and their bytes where
// the offsets say.
func TestGGUFReadBack(t *testing.T) {
	g := &gguf{}
	g.str("general.architecture", "qwen3")
	g.u32("qwen3.block_count", 7)
	g.f32("qwen3.rope.freq_base", 1e6)
	g.flag("tokenizer.ggml.add_bos_token", true)
	g.strs("tokenizer.ggml.tokens", []string{"a", "Ġb", "<|im_end|>", ""})
	g.i32s("tokenizer.ggml.token_type", []int32{1, 1, 3, -2})
	g.f32s("tokenizer.ggml.scores", []float32{0.5, -1.25})
	norm := f32([]float32{1, 2, 3})
	weight := f16([]float32{0.5, -2, 65504, 0, 1, 1, 1, 1e-3})
	g.tensor("output_norm.weight", typeF32, norm, 3)
	g.tensor("output.weight", typeF16, weight, 4, 2)
	path := filepath.Join(t.TempDir(), "m.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	f.Close()

	info := readBack(t, path)
	if info.Version != 3 || info.TensorCount != 2 {
		t.Fatalf("header: version %d, %d tensors", info.Version, info.TensorCount)
	}
	md := info.Metadata
	qwen := md["qwen3"].(map[string]any)
	tok := md["tokenizer"].(map[string]any)["ggml"].(map[string]any)
	for what, pair := range map[string][2]any{
		"architecture": {md["general"].(map[string]any)["architecture"], "qwen3"},
		"block_count":  {qwen["block_count"], 7.0},
		"freq_base":    {qwen["rope"].(map[string]any)["freq_base"], 1e6},
		"add_bos":      {tok["add_bos_token"], true},
		"tokens":       {tok["tokens"], []any{"a", "Ġb", "<|im_end|>", ""}},
		"token_type":   {tok["token_type"], []any{1.0, 1.0, 3.0, -2.0}},
		"scores":       {tok["scores"], []any{0.5, -1.25}},
	} {
		if !reflect.DeepEqual(pair[0], pair[1]) {
			t.Errorf("%s: read %#v, wrote %#v", what, pair[0], pair[1])
		}
	}
	want := []struct {
		name string
		dims []uint64
		typ  uint32
		data []byte
	}{{"output_norm.weight", []uint64{3}, typeF32, norm}, {"output.weight", []uint64{4, 2}, typeF16, weight}}
	for i, w := range want {
		got := info.Tensors[i]
		if got.Name != w.name || !reflect.DeepEqual(got.Dimensions, w.dims) || got.Type != w.typ || got.Offset%ggufAlignment != 0 || got.Data != hex.EncodeToString(w.data) {
			t.Errorf("tensor %d: read %+v", i, got)
		}
	}
}

// TestModelMetadata: the generated model declares Qwen3's architecture
// with its parameters, Qwen3's whole vocabulary (151,669 ids; special
// added tokens as control tokens, <think> and the other added tokens as
// user-defined), its merges and its chat template.
func TestModelMetadata(t *testing.T) {
	p := Params{Layers: 1, Embed: 16, Heads: 1, KVHeads: 1, HeadDim: 16, FFN: 16, Seed: 7}
	info := readBack(t, Model(t, p))
	md := info.Metadata
	qwen := md["qwen3"].(map[string]any)
	if md["general"].(map[string]any)["architecture"] != "qwen3" || qwen["block_count"] != 1.0 || qwen["embedding_length"] != 16.0 {
		t.Fatalf("general/qwen3 metadata: %v %v", md["general"], qwen)
	}
	if len(info.Tensors) != 3+11 {
		t.Fatalf("%d tensors for one block", len(info.Tensors))
	}
	tok := md["tokenizer"].(map[string]any)
	ggml := tok["ggml"].(map[string]any)
	tokens, types := ggml["tokens"].([]any), ggml["token_type"].([]any)
	if len(tokens) != 151669 || len(types) != len(tokens) || len(ggml["merges"].([]any)) != 151387 {
		t.Fatalf("%d tokens, %d types, %d merges", len(tokens), len(types), len(ggml["merges"].([]any)))
	}
	for id, want := range map[int]struct {
		text string
		typ  float64
	}{151643: {"<|endoftext|>", tokControl}, 151645: {"<|im_end|>", tokControl}, 151659: {"<|fim_prefix|>", tokControl},
		151667: {"<think>", tokUserDefined}, 151657: {"<tool_call>", tokUserDefined}, 9707: {"Hello", tokNormal}} {
		if tokens[id] != want.text || types[id] != want.typ {
			t.Errorf("token %d: %v type %v", id, tokens[id], types[id])
		}
	}
	if ggml["eos_token_id"] != 151645.0 || ggml["model"] != "gpt2" || ggml["pre"] != "qwen2" {
		t.Errorf("eos %v model %v pre %v", ggml["eos_token_id"], ggml["model"], ggml["pre"])
	}
	if tpl, _ := tok["chat_template"].(string); len(tpl) < 1000 {
		t.Errorf("chat template of %d bytes", len(tpl))
	}
}
