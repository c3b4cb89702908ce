package session

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/berth-sh/berth/internal/testing/hfref"
	"github.com/berth-sh/berth/results"
	"github.com/berth-sh/berth/session/samples"
	"github.com/berth-sh/berth/session/testengine"
)

func (e *testEnv) samplesRaw(t *testing.T, id string, body, accept string) (int, string, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.url+"/sessions/"+id+"/samples", bytes.NewBufferString(body))
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), data
}

// TestSafetensorsParsesIndependently is the wire line: the
// payload, read by the npm safetensors reader, has the tensors of the
// facts (tokens.0 I64, loss_mask.0 U8, rollout_log_probs.0 F64,
// _samples_meta U8 JSON) with the right shapes and values.
func TestSafetensorsParsesIndependently(t *testing.T) {
	hfref.RequireNode(t)
	e := newEnv(t, agentScript(func(testengine.Call) string { return "st" }), testengine.Options{}, nil)
	id := e.create()
	e.run(id, "st", 4, func(int) bool { return false }, func(int) bool { return false })
	status, ctype, data := e.samplesRaw(t, id, `{}`, "")
	if status != http.StatusOK || ctype != "application/octet-stream" {
		t.Fatalf("samples: %d %s %s", status, ctype, data)
	}
	p, err := samples.DecodeSafetensors(data)
	if err != nil {
		t.Fatal(err)
	}
	s := p.Samples[0]
	path := filepath.Join(t.TempDir(), "samples.safetensors")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Tensors map[string]struct {
			DType  string    `json:"dtype"`
			Shape  []int     `json:"shape"`
			Values []float64 `json:"values"`
		} `json:"tensors"`
		Meta struct {
			Samples []struct {
				Response       string   `json:"response"`
				ResponseLength int      `json:"response_length"`
				Status         string   `json:"status"`
				Nulls          []string `json:"nulls"`
			} `json:"samples"`
			SessionMetadata map[string]json.RawMessage `json:"session_metadata"`
			EmptyReason     *string                    `json:"empty_reason"`
		} `json:"meta"`
	}
	hfref.Run(t, "safetensors", map[string]string{"path": path}, &ref)
	want := map[string]struct {
		dtype string
		n     int
	}{"tokens.0": {"I64", len(s.Tokens)}, "loss_mask.0": {"U8", s.ResponseLength}, "rollout_log_probs.0": {"F64", s.ResponseLength}}
	if len(ref.Tensors) != 4 {
		t.Errorf("tensors %v, want 4", keys(ref.Tensors))
	}
	for name, w := range want {
		got, ok := ref.Tensors[name]
		if !ok || got.DType != w.dtype || !slices.Equal(got.Shape, []int{w.n}) {
			t.Errorf("%s: %+v, want %s [%d]", name, got, w.dtype, w.n)
		}
	}
	if m := ref.Tensors["_samples_meta"]; m.DType != "U8" || len(m.Shape) != 1 {
		t.Errorf("_samples_meta: %s %v", m.DType, m.Shape)
	}
	for i, v := range ref.Tensors["tokens.0"].Values {
		if int(v) != s.Tokens[i] {
			t.Fatalf("tokens[%d] = %v, want %d", i, v, s.Tokens[i])
		}
	}
	for i, v := range ref.Tensors["rollout_log_probs.0"].Values {
		if v != s.RolloutLogProbs[i] || float64(s.LossMask[i]) != ref.Tensors["loss_mask.0"].Values[i] {
			t.Fatalf("position %d differs", i)
		}
	}
	ms := ref.Meta.Samples
	if len(ms) != 1 || ms[0].Status != "completed" || ms[0].ResponseLength != s.ResponseLength || ms[0].Response != s.Response ||
		!slices.Equal(ms[0].Nulls, []string{"rollout_routed_experts", "rollout_indexer_topk"}) || ref.Meta.EmptyReason != nil {
		t.Errorf("meta %+v", ref.Meta.Samples)
	}
	for _, k := range []string{"accumulated_token_ids", "max_trim_tokens", "mismatch_counts"} {
		if _, ok := ref.Meta.SessionMetadata[k]; !ok {
			t.Errorf("session_metadata lacks %s", k)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestSamplesRoute: JSON lines on request, truncation at a turn boundary,
// the empty reasons, and a bad body.
func TestSamplesRoute(t *testing.T) {
	e := newEnv(t, agentScript(func(testengine.Call) string { return "sr" }), testengine.Options{}, nil)
	id := e.create()

	status, _, data := e.samplesRaw(t, id, ``, "")
	p, err := samples.DecodeSafetensors(data)
	if status != http.StatusOK || err != nil || p.EmptyReason != samples.NoRecords || len(p.Samples) != 0 {
		t.Fatalf("no records: %d %v %+v", status, err, p)
	}
	e.run(id, "sr", 3, func(int) bool { return false }, func(int) bool { return false })
	full, err := e.client.Samples(t.Context(), id, 0)
	if err != nil {
		t.Fatal(err)
	}

	status, ctype, data := e.samplesRaw(t, id, `{}`, "application/json")
	if status != http.StatusOK || ctype != "application/x-ndjson" {
		t.Fatalf("json lines: %d %s", status, ctype)
	}
	jl, err := samples.ReadJSONLines(bytes.NewReader(data))
	if err != nil || len(jl.Samples) != 1 || !slices.Equal(jl.Samples[0].Tokens, full.Samples[0].Tokens) ||
		!slices.Equal(jl.Samples[0].LossMask, full.Samples[0].LossMask) || len(jl.Samples[0].TurnStarts) != 3 {
		t.Fatalf("json lines differ from the safetensors payload: %v", err)
	}
	// The line reads as berth view's samples.jsonl: per-token texts and
	// the session's counters in the sample's metadata.
	var line map[string]json.RawMessage
	json.Unmarshal(bytes.SplitN(data, []byte("\n"), 2)[0], &line)
	var texts []string
	json.Unmarshal(line["token_texts"], &texts)
	if len(texts) != len(full.Samples[0].Tokens) || texts[0] != "<|im_start|>" || string(line["status"]) != `"COMPLETED"` ||
		!bytes.Contains(line["metadata"], []byte(`"tito_mismatch":{"assistant_text":0,"non_assistant_text":0,"special_token_count":0,"special_token_type":0}`)) {
		t.Errorf("line: status %s, metadata %s, %d texts", line["status"], line["metadata"], len(texts))
	}

	// berth view's reader takes it without a problem.
	sf, err := results.ReadSamples(t.Context(), bytes.NewReader(data))
	if err != nil || len(sf.Samples) != 1 || len(sf.Errors) != 0 || len(sf.Samples[0].Problems) != 0 {
		t.Errorf("berth view's reader: %v %+v", err, sf)
	} else if got := sf.Samples[0].TITOCounters(); len(got) != 4 || got[0].Bad {
		t.Errorf("counters as the viewer sees them: %+v", got)
	}

	// A limit inside the second turn keeps the first turn whole and cuts
	// the second; the merged status is truncated.
	recs := e.srv.recordsOf(t, id)
	limit := len(recs[1].PromptIDs) + 2
	cut, err := e.client.Samples(t.Context(), id, limit)
	if err != nil {
		t.Fatal(err)
	}
	cs := cut.Samples[0]
	if len(cs.Tokens) != limit || cs.Status != samples.Truncated || !slices.Equal(cs.Tokens, full.Samples[0].Tokens[:limit]) {
		t.Errorf("truncated: %d tokens status %s", len(cs.Tokens), cs.Status)
	}
	// A limit inside the first prompt leaves nothing.
	none, err := e.client.Samples(t.Context(), id, 3)
	if err != nil || none.EmptyReason != samples.AllTruncated {
		t.Errorf("all truncated: %v %+v", err, none)
	}
	if status, _, _ := e.samplesRaw(t, id, `{"max_seq_len": "x"}`, ""); status != http.StatusBadRequest {
		t.Errorf("bad body: %d", status)
	}
}
