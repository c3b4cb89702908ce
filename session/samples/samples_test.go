package samples

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

func decode(ids []int) string {
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(string(rune('a' + id%26)))
	}
	return b.String()
}

// Two turns of a conversation: prompt [1 2 3], output [4 5 EOS=9];
// then the observation [7 8] and output [6 9].
func twoTurns() ([]Turn, []int) {
	t1 := Turn{PromptIDs: []int{1, 2, 3}, OutputIDs: []int{4, 5, 9}, LogProbs: []float64{-.1, -.2, -.3}, FinishReason: "tool_calls", PromptTokens: 3, WeightVersion: "w1", Timestamp: 10}
	t2 := Turn{PromptIDs: []int{1, 2, 3, 4, 5, 9, 7, 8}, OutputIDs: []int{6, 9}, LogProbs: []float64{-.4, -.5}, FinishReason: "stop", PromptTokens: 8, CachedTokens: 6, WeightVersion: "w1", Timestamp: 20}
	return []Turn{t1, t2}, []int{1, 2, 3, 4, 5, 9, 7, 8, 6, 9}
}

func TestMergeMasksObservations(t *testing.T) {
	turns, acc := twoTurns()
	ss, err := FromTurns(turns, acc, 0, decode)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Merge(ss, decode)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.Tokens, acc) || m.ResponseLength != 7 || m.Status != Completed {
		t.Fatalf("merged %+v", m)
	}
	if want := []uint8{1, 1, 1, 0, 0, 1, 1}; !slices.Equal(m.LossMask, want) {
		t.Errorf("mask %v, want %v", m.LossMask, want)
	}
	if want := []float64{-.1, -.2, -.3, 0, 0, -.4, -.5}; !slices.Equal(m.RolloutLogProbs, want) {
		t.Errorf("logprobs %v", m.RolloutLogProbs)
	}
	if m.Response != decode([]int{4, 5, 9, 7, 8, 6, 9}) || !slices.Equal(m.WeightVersions, []string{"w1", "w1"}) ||
		m.PrefixCacheInfo != (PrefixCacheInfo{CachedTokens: 6, TotalPromptTokens: 11}) {
		t.Errorf("response %q versions %v cache %+v", m.Response, m.WeightVersions, m.PrefixCacheInfo)
	}
	if life, _ := m.Metadata["lifecycle"].([]any); len(life) != 2 {
		t.Errorf("lifecycle %v", m.Metadata)
	}
}

// A GLM-style turn whose stop token the next prompt dropped (max trim 1)
// loses it from its sample; without the allowance assembly fails.
func TestTrailingTrim(t *testing.T) {
	t1 := Turn{PromptIDs: []int{1, 2}, OutputIDs: []int{3, 50}, LogProbs: []float64{-1, -2}, FinishReason: "tool_calls"}
	// The next prompt replaced the stop token 50 with its own 60.
	t2 := Turn{PromptIDs: []int{1, 2, 3, 60, 7}, OutputIDs: []int{4}, LogProbs: []float64{-3}, FinishReason: "stop"}
	acc := []int{1, 2, 3, 60, 7, 4}
	if _, err := FromTurns([]Turn{t1, t2}, acc, 0, decode); !errors.Is(err, ErrAssembly) {
		t.Fatalf("without trim allowance: %v", err)
	}
	ss, err := FromTurns([]Turn{t1, t2}, acc, 1, decode)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ss[0].Tokens, []int{1, 2, 3}) || ss[0].ResponseLength != 1 || len(ss[0].LossMask) != 1 {
		t.Errorf("trimmed sample %+v", ss[0])
	}
	// The last turn may not be trimmed.
	if _, err := FromTurns([]Turn{t1}, []int{1, 2, 3}, 1, decode); !errors.Is(err, ErrAssembly) {
		t.Errorf("trimmed last turn: %v", err)
	}
}

func TestStatusAndTruncation(t *testing.T) {
	for fr, want := range map[string]Status{"stop": Completed, "tool_calls": Completed, "length": Truncated, "abort": Aborted, "": Pending} {
		if got := StatusOf(fr); got != want {
			t.Errorf("%q -> %s, want %s", fr, got, want)
		}
	}
	turns, acc := twoTurns()
	ss, _ := FromTurns(turns, acc, 0, decode)
	// 9 tokens: the first turn fits (6), the second is cut by one.
	cut := Truncate(ss, 9, decode)
	if len(cut) != 2 || cut[1].Status != Truncated || len(cut[1].Tokens) != 9 || cut[1].ResponseLength != 1 {
		t.Fatalf("truncate: %+v", cut)
	}
	m, _ := Merge(cut, decode)
	if m.Status != Truncated || !slices.Equal(m.LossMask, []uint8{1, 1, 1, 0, 0, 1}) {
		t.Errorf("merged truncated %+v", m)
	}
	if got := Truncate(ss, 4, decode); len(got) != 1 || got[0].ResponseLength != 1 {
		t.Errorf("cut inside the first turn: %+v", got)
	}
	if got := Truncate(ss, 3, decode); len(got) != 0 {
		t.Errorf("nothing fits: %+v", got)
	}
	// Merging stops at the first turn that did not complete.
	ss[0].Status = Aborted
	m, _ = Merge(ss, decode)
	if m.Status != Aborted || len(m.Tokens) != 6 {
		t.Errorf("merge past an aborted turn: %+v", m)
	}
}

func TestAssemblyErrors(t *testing.T) {
	turns, acc := twoTurns()
	if _, err := FromTurns(turns, acc[:len(acc)-1], 0, decode); !errors.Is(err, ErrAssembly) {
		t.Errorf("short accumulated ids: %v", err)
	}
	bad := slices.Clone(turns)
	bad[1].LogProbs = bad[1].LogProbs[:1]
	if _, err := FromTurns(bad, acc, 0, decode); !errors.Is(err, ErrAssembly) {
		t.Errorf("logprob count: %v", err)
	}
	ss, _ := FromTurns(turns, acc, 0, decode)
	ss[1].Tokens[0] = 99
	if _, err := Merge(ss, decode); !errors.Is(err, ErrAssembly) {
		t.Errorf("diverging turns merged: %v", err)
	}
}

// TestSafetensorsBytes checks the file byte by byte against the format:
// u64 LE header length, JSON header padded with spaces to 8 bytes,
// offsets relative to the data, 8-byte dtypes first.
func TestSafetensorsBytes(t *testing.T) {
	turns, acc := twoTurns()
	ss, _ := FromTurns(turns, acc, 0, decode)
	m, _ := Merge(ss, decode)
	data, err := EncodeSafetensors(&Payload{Samples: []Sample{m}, SessionMetadata: json.RawMessage(`{"k":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(data)
	if (8+n)%8 != 0 || n > uint64(len(data)) {
		t.Fatalf("header length %d", n)
	}
	hdr := data[8 : 8+n]
	if strings.TrimRight(string(hdr), " ") != strings.TrimSpace(string(hdr)) || hdr[0] != '{' {
		t.Fatal("header is not JSON padded with spaces")
	}
	var h map[string]struct {
		DType   string `json:"dtype"`
		Shape   []int  `json:"shape"`
		Offsets []int  `json:"data_offsets"`
	}
	if err := json.Unmarshal(hdr, &h); err != nil {
		t.Fatal(err)
	}
	body := data[8+n:]
	tok := h["tokens.0"]
	lp := h["rollout_log_probs.0"]
	// 8-byte dtypes first, by name: rollout_log_probs.0, tokens.0; then the bytes.
	if tok.DType != "I64" || !slices.Equal(tok.Shape, []int{10}) || lp.Offsets[0] != 0 || tok.Offsets[0] != lp.Offsets[1] {
		t.Errorf("tokens.0 %+v rollout_log_probs.0 %+v", tok, lp)
	}
	for i, id := range acc {
		if got := int64(binary.LittleEndian.Uint64(body[tok.Offsets[0]+8*i:])); got != int64(id) {
			t.Fatalf("token %d = %d", i, got)
		}
	}
	if got := math.Float64frombits(binary.LittleEndian.Uint64(body[lp.Offsets[0]+8*5:])); got != -.4 || lp.DType != "F64" {
		t.Errorf("logprob 5 = %v", got)
	}
	lm, meta := h["loss_mask.0"], h[MetaTensor]
	if lm.DType != "U8" || !bytes.Equal(body[lm.Offsets[0]:lm.Offsets[1]], []byte{1, 1, 1, 0, 0, 1, 1}) {
		t.Errorf("loss mask bytes %v", body[lm.Offsets[0]:lm.Offsets[1]])
	}
	var pm map[string]any
	if err := json.Unmarshal(body[meta.Offsets[0]:meta.Offsets[1]], &pm); err != nil || pm["empty_reason"] != nil {
		t.Errorf("meta %v %v", err, pm)
	}
	if meta.Offsets[0] != tok.Offsets[1] || lm.Offsets[0] != meta.Offsets[1] || lm.Offsets[1] != len(body) {
		t.Errorf("layout: meta %v loss mask %v, data %d bytes", meta.Offsets, lm.Offsets, len(body))
	}
	back, err := DecodeSafetensors(data)
	if err != nil || !slices.Equal(back.Samples[0].Tokens, acc) || back.Samples[0].Status != Completed || string(back.SessionMetadata) != `{"k":1}` {
		t.Errorf("round trip: %v %+v", err, back)
	}
}

func TestReadSafetensorsRejectsMalformed(t *testing.T) {
	good, _ := WriteSafetensors(map[string]Tensor{"a": {DType: "U8", Shape: []int{2}, Data: []byte{1, 2}}, "b": {DType: "I64", Shape: []int{1}, Data: make([]byte, 8)}})
	if _, err := ReadSafetensors(good); err != nil {
		t.Fatal(err)
	}
	withHeader := func(h string, data []byte) []byte {
		out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
		return append(append(out, h...), data...)
	}
	for name, b := range map[string][]byte{
		"short":        {1, 2},
		"huge header":  binary.LittleEndian.AppendUint64(nil, 1<<40),
		"bad json":     withHeader("{", nil),
		"out of range": withHeader(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}`, []byte{1}),
		"shape":        withHeader(`{"a":{"dtype":"I64","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 8)),
		"gap":          withHeader(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, []byte{0, 1}),
		"trailing":     withHeader(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, []byte{0, 1}),
		"dtype":        withHeader(`{"a":{"dtype":"F16","shape":[1],"data_offsets":[0,2]}}`, []byte{0, 1}),
	} {
		if _, err := ReadSafetensors(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestJSONLinesRoundTrip(t *testing.T) {
	turns, acc := twoTurns()
	ss, _ := FromTurns(turns, acc, 0, decode)
	m, _ := Merge(ss, decode)
	var b bytes.Buffer
	info := LineInfo{SessionID: "s1", TokenText: func(id int) string { return decode([]int{id}) }, Counters: map[string]int{"non_assistant_text": 0}}
	if err := WriteJSONLines(&b, &Payload{Samples: []Sample{m}}, info); err != nil {
		t.Fatal(err)
	}
	line := b.String()
	for _, want := range []string{`"loss_mask":[1,1,1,0,0,1,1]`, `"turn_starts":[0,6]`, `"status":"COMPLETED"`, `"session_id":"s1"`,
		`"tito_mismatch":{"non_assistant_text":0}`, `"token_texts":["b","c","d","e","f","j","h","i","g","j"]`} {
		if !strings.Contains(line, want) {
			t.Errorf("line lacks %s: %s", want, line)
		}
	}
	back, err := ReadJSONLines(&b)
	if err != nil || !slices.Equal(back.Samples[0].LossMask, m.LossMask) || back.Samples[0].Status != Completed || !slices.Equal(back.Samples[0].TurnStarts, []int{0, 6}) {
		t.Errorf("%v %+v", err, back)
	}
	b.Reset()
	WriteJSONLines(&b, &Payload{EmptyReason: NoRecords}, LineInfo{SessionID: "s2"})
	if back, err := ReadJSONLines(&b); err != nil || back.EmptyReason != NoRecords || len(back.Samples) != 0 {
		t.Errorf("empty: %v %+v", err, back)
	}
}
