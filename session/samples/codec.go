package samples

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
)

// Empty reasons of a payload without samples.
const (
	NoRecords    = "no_records"
	AllTruncated = "all_truncated"
)

// MetaTensor is the name of the tensor that carries the JSON metadata.
const MetaTensor = "_samples_meta"

// Payload is what the samples route returns.
type Payload struct {
	Samples         []Sample
	SessionMetadata json.RawMessage // the session's metadata object
	EmptyReason     string          // "" when there are samples
	// V2 is Miles's v2 wire (a tree session's): every sample carries
	// "reward" (radixark/miles miles/rollout/session/samples/codec.py
	// SAMPLES_VALUE_SPEC_V2 at 31f1ca961a94cb860cec3b2dea34ec332bfa8f76);
	// the v1 wire has no such key.
	V2 bool
}

// sampleFields are a sample's JSON fields, in Miles's order.
type sampleFields struct {
	Response        string          `json:"response"`
	ResponseLength  int             `json:"response_length"`
	Status          Status          `json:"status"`
	WeightVersions  []string        `json:"weight_versions"`
	PrefixCacheInfo PrefixCacheInfo `json:"prefix_cache_info"`
	Metadata        map[string]any  `json:"metadata"`
}

func fieldsOf(s Sample) sampleFields {
	wv, md := s.WeightVersions, s.Metadata
	if wv == nil {
		wv = []string{}
	}
	if md == nil {
		md = map[string]any{}
	}
	return sampleFields{Response: s.Response, ResponseLength: s.ResponseLength, Status: s.Status, WeightVersions: wv,
		PrefixCacheInfo: s.PrefixCacheInfo, Metadata: md}
}

func (f sampleFields) into(s *Sample) {
	s.Response, s.ResponseLength, s.Status = f.Response, f.ResponseLength, f.Status
	s.WeightVersions, s.PrefixCacheInfo, s.Metadata = f.WeightVersions, f.PrefixCacheInfo, f.Metadata
}

// sampleMeta is a sample's part of _samples_meta.
type sampleMeta struct {
	sampleFields
	// Reward is on the v2 wire only (null when unassigned).
	Reward *reward `json:"reward,omitempty"`
	// Nulls names the tensor fields this server never fills (routing
	// replay), so that a Miles decoder sets them to None.
	Nulls []string `json:"nulls"`
}

type payloadMeta struct {
	Samples         []sampleMeta    `json:"samples"`
	SessionMetadata json.RawMessage `json:"session_metadata"`
	EmptyReason     *string         `json:"empty_reason"`
}

var replayNulls = []string{"rollout_routed_experts", "rollout_indexer_topk"}

// reward writes its value, null included, where a nil *reward is left out.
type reward struct{ v any }

func (r *reward) MarshalJSON() ([]byte, error) { return json.Marshal(r.v) }

func (r *reward) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, &r.v) }

// tail is the session metadata ({} when unset) and the empty reason
// (null when there are samples).
func (p *Payload) tail() (json.RawMessage, *string) {
	md := p.SessionMetadata
	if len(md) == 0 {
		md = json.RawMessage("{}")
	}
	if p.EmptyReason == "" {
		return md, nil
	}
	r := p.EmptyReason
	return md, &r
}

func (p *Payload) meta() ([]byte, error) {
	pm := payloadMeta{Samples: []sampleMeta{}}
	pm.SessionMetadata, pm.EmptyReason = p.tail()
	for _, s := range p.Samples {
		m := sampleMeta{sampleFields: fieldsOf(s), Nulls: replayNulls}
		if p.V2 {
			m.Reward = &reward{s.Reward}
		}
		pm.Samples = append(pm.Samples, m)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(pm); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// Tensor is one safetensors entry.
type Tensor struct {
	DType string
	Shape []int
	Data  []byte // little-endian
}

var dtypeSize = map[string]int{"I64": 8, "F64": 8, "U8": 1}

// EncodeSafetensors writes the payload as a safetensors file.
func EncodeSafetensors(p *Payload) ([]byte, error) {
	meta, err := p.meta()
	if err != nil {
		return nil, err
	}
	tensors := map[string]Tensor{MetaTensor: {DType: "U8", Shape: []int{len(meta)}, Data: meta}}
	for i, s := range p.Samples {
		if len(s.LossMask) != s.ResponseLength || len(s.RolloutLogProbs) != s.ResponseLength {
			return nil, fmt.Errorf("sample %d: %d mask and %d logprob entries for %d response tokens", i, len(s.LossMask), len(s.RolloutLogProbs), s.ResponseLength)
		}
		tok := make([]byte, 8*len(s.Tokens))
		for j, id := range s.Tokens {
			binary.LittleEndian.PutUint64(tok[8*j:], uint64(int64(id)))
		}
		lp := make([]byte, 8*len(s.RolloutLogProbs))
		for j, f := range s.RolloutLogProbs {
			binary.LittleEndian.PutUint64(lp[8*j:], math.Float64bits(f))
		}
		idx := strconv.Itoa(i)
		tensors["tokens."+idx] = Tensor{DType: "I64", Shape: []int{len(s.Tokens)}, Data: tok}
		tensors["loss_mask."+idx] = Tensor{DType: "U8", Shape: []int{len(s.LossMask)}, Data: append([]byte(nil), s.LossMask...)}
		tensors["rollout_log_probs."+idx] = Tensor{DType: "F64", Shape: []int{len(s.RolloutLogProbs)}, Data: lp}
	}
	return WriteSafetensors(tensors)
}

// WriteSafetensors lays tensors out as the safetensors format specifies:
// an 8-byte little-endian header length, a JSON header of name ->
// {dtype, shape, data_offsets} padded with spaces to a multiple of 8, then
// the data, largest alignment first and by name within an alignment (the
// reference implementation's order).
func WriteSafetensors(tensors map[string]Tensor) ([]byte, error) {
	names := make([]string, 0, len(tensors))
	for n := range tensors {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := dtypeSize[tensors[names[i]].DType], dtypeSize[tensors[names[j]].DType]
		if a != b {
			return a > b
		}
		return names[i] < names[j]
	})
	var hdr bytes.Buffer
	hdr.WriteByte('{')
	off := 0
	for i, n := range names {
		t := tensors[n]
		if _, ok := dtypeSize[t.DType]; !ok {
			return nil, fmt.Errorf("safetensors: dtype %q", t.DType)
		}
		if i > 0 {
			hdr.WriteByte(',')
		}
		entry, _ := json.Marshal(struct {
			DType   string `json:"dtype"`
			Shape   []int  `json:"shape"`
			Offsets [2]int `json:"data_offsets"`
		}{t.DType, t.Shape, [2]int{off, off + len(t.Data)}})
		key, _ := json.Marshal(n)
		hdr.Write(key)
		hdr.WriteByte(':')
		hdr.Write(entry)
		off += len(t.Data)
	}
	hdr.WriteByte('}')
	for hdr.Len()%8 != 0 {
		hdr.WriteByte(' ')
	}
	out := make([]byte, 8, 8+hdr.Len()+off)
	binary.LittleEndian.PutUint64(out, uint64(hdr.Len()))
	out = append(out, hdr.Bytes()...)
	for _, n := range names {
		out = append(out, tensors[n].Data...)
	}
	return out, nil
}

// MaxHeaderBytes bounds a safetensors header, as the format's reader does.
const MaxHeaderBytes = 100 << 20

// ReadSafetensors parses and validates a safetensors file: known dtypes,
// shapes that match the byte counts, offsets in bounds, contiguous and
// covering the data exactly.
func ReadSafetensors(b []byte) (map[string]Tensor, error) {
	if len(b) < 8 {
		return nil, errors.New("safetensors: too short")
	}
	n := binary.LittleEndian.Uint64(b)
	if n > MaxHeaderBytes || n > uint64(len(b)-8) {
		return nil, fmt.Errorf("safetensors: header length %d out of bounds", n)
	}
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &hdr); err != nil {
		return nil, fmt.Errorf("safetensors: header: %w", err)
	}
	data := b[8+n:]
	type span struct{ lo, hi int }
	var spans []span
	out := map[string]Tensor{}
	for name, raw := range hdr {
		if name == "__metadata__" {
			continue
		}
		var e struct {
			DType   string `json:"dtype"`
			Shape   []int  `json:"shape"`
			Offsets []int  `json:"data_offsets"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			return nil, fmt.Errorf("safetensors: %s: %w", name, err)
		}
		size, ok := dtypeSize[e.DType]
		if !ok || len(e.Offsets) != 2 {
			return nil, fmt.Errorf("safetensors: %s: dtype %q or offsets %v", name, e.DType, e.Offsets)
		}
		count := 1
		for _, d := range e.Shape {
			if d < 0 || (d > 0 && count > math.MaxInt32/d) {
				return nil, fmt.Errorf("safetensors: %s: bad shape %v", name, e.Shape)
			}
			count *= d
		}
		lo, hi := e.Offsets[0], e.Offsets[1]
		if lo < 0 || hi < lo || hi > len(data) || hi-lo != count*size {
			return nil, fmt.Errorf("safetensors: %s: offsets [%d,%d) do not hold %v %s", name, lo, hi, e.Shape, e.DType)
		}
		spans = append(spans, span{lo, hi})
		out[name] = Tensor{DType: e.DType, Shape: e.Shape, Data: data[lo:hi]}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].lo < spans[j].lo })
	at := 0
	for _, s := range spans {
		if s.lo != at {
			return nil, errors.New("safetensors: tensor data is not contiguous")
		}
		at = s.hi
	}
	if at != len(data) {
		return nil, errors.New("safetensors: trailing bytes after the tensors")
	}
	return out, nil
}

// DecodeSafetensors reads a payload back.
func DecodeSafetensors(b []byte) (*Payload, error) {
	ts, err := ReadSafetensors(b)
	if err != nil {
		return nil, err
	}
	mt, ok := ts[MetaTensor]
	if !ok || mt.DType != "U8" || len(mt.Shape) != 1 {
		return nil, errors.New("samples: no rank-one U8 _samples_meta tensor")
	}
	var pm payloadMeta
	if err := json.Unmarshal(mt.Data, &pm); err != nil {
		return nil, fmt.Errorf("samples: meta: %w", err)
	}
	p := &Payload{SessionMetadata: pm.SessionMetadata, V2: hasReward(mt.Data)}
	if pm.EmptyReason != nil {
		p.EmptyReason = *pm.EmptyReason
	}
	for i, m := range pm.Samples {
		idx := strconv.Itoa(i)
		tok, lm, lp := ts["tokens."+idx], ts["loss_mask."+idx], ts["rollout_log_probs."+idx]
		if tok.DType != "I64" || lm.DType != "U8" || lp.DType != "F64" {
			return nil, fmt.Errorf("samples: sample %d: missing or mistyped tensors", i)
		}
		s := Sample{LossMask: append([]uint8(nil), lm.Data...)}
		m.into(&s)
		if m.Reward != nil {
			s.Reward = m.Reward.v
		}
		for j := 0; j+8 <= len(tok.Data); j += 8 {
			s.Tokens = append(s.Tokens, int(int64(binary.LittleEndian.Uint64(tok.Data[j:]))))
		}
		for j := 0; j+8 <= len(lp.Data); j += 8 {
			s.RolloutLogProbs = append(s.RolloutLogProbs, math.Float64frombits(binary.LittleEndian.Uint64(lp.Data[j:])))
		}
		p.Samples = append(p.Samples, s)
	}
	return p, nil
}

// hasReward reports whether a payload's samples carry "reward" (the v2
// wire; a null reward decodes as no *reward at all).
func hasReward(meta []byte) bool {
	var pm struct {
		Samples []map[string]json.RawMessage `json:"samples"`
	}
	if json.Unmarshal(meta, &pm) != nil || len(pm.Samples) == 0 {
		return false
	}
	_, ok := pm.Samples[0]["reward"]
	return ok
}
