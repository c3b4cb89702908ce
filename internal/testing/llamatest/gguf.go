package llamatest

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// GGUF v3, little-endian, as ggml's docs/gguf.md specifies it: a header
// (magic, version, tensor count, metadata count), the metadata key-value
// pairs, the tensor infos (name, dimensions innermost first, type, offset
// into the data section), padding to the alignment, then each tensor's
// bytes at its offset, each offset a multiple of the alignment.
const (
	ggufMagic     = "GGUF"
	ggufVersion   = 3
	ggufAlignment = 32 // the default when general.alignment is absent
)

// Metadata value types (gguf_metadata_value_type).
const (
	gguint32  = 4
	ggint32   = 5
	ggfloat32 = 6
	ggbool    = 7
	ggstring  = 8
	ggarray   = 9
)

// Tensor types (ggml_type) the model uses.
const (
	typeF32 = 0
	typeF16 = 1
)

// gguf collects a file's metadata and tensors in the order they are added.
type gguf struct {
	kvs     []kv
	tensors []tensorInfo
}

type kv struct {
	key string
	typ uint32
	val any // uint32, int32, float32, bool, string, []string, []int32, []float32
}

type tensorInfo struct {
	name string
	dims []uint64 // innermost first (ggml's ne[0], ne[1], ...)
	typ  uint32
	data []byte
}

func (g *gguf) add(key string, typ uint32, val any) { g.kvs = append(g.kvs, kv{key, typ, val}) }

func (g *gguf) u32(key string, v uint32)    { g.add(key, gguint32, v) }
func (g *gguf) f32(key string, v float32)   { g.add(key, ggfloat32, v) }
func (g *gguf) flag(key string, v bool)     { g.add(key, ggbool, v) }
func (g *gguf) str(key, v string)           { g.add(key, ggstring, v) }
func (g *gguf) strs(key string, v []string) { g.add(key, ggarray, v) }
func (g *gguf) i32s(key string, v []int32)  { g.add(key, ggarray, v) }
func (g *gguf) f32s(key string, v []float32) {
	g.add(key, ggarray, v)
}

func (g *gguf) tensor(name string, typ uint32, data []byte, dims ...uint64) {
	g.tensors = append(g.tensors, tensorInfo{name: name, dims: dims, typ: typ, data: data})
}

// ggufWriter writes little-endian values and counts what it wrote.
type ggufWriter struct {
	w   *bufio.Writer
	n   int64
	err error
}

func (w *ggufWriter) raw(b []byte) {
	if w.err != nil {
		return
	}
	var n int
	n, w.err = w.w.Write(b)
	w.n += int64(n)
}

func (w *ggufWriter) u32(v uint32) { w.raw(binary.LittleEndian.AppendUint32(nil, v)) }
func (w *ggufWriter) u64(v uint64) { w.raw(binary.LittleEndian.AppendUint64(nil, v)) }
func (w *ggufWriter) str(s string) { w.u64(uint64(len(s))); w.raw([]byte(s)) }
func (w *ggufWriter) pad() {
	if r := w.n % ggufAlignment; r != 0 {
		w.raw(make([]byte, ggufAlignment-r))
	}
}

func (w *ggufWriter) value(typ uint32, v any) {
	switch x := v.(type) {
	case uint32:
		w.u32(x)
	case int32:
		w.u32(uint32(x))
	case float32:
		w.u32(math.Float32bits(x))
	case bool:
		b := byte(0)
		if x {
			b = 1
		}
		w.raw([]byte{b})
	case string:
		w.str(x)
	case []string:
		w.u32(ggstring)
		w.u64(uint64(len(x)))
		for _, s := range x {
			w.str(s)
		}
	case []int32:
		w.u32(ggint32)
		w.u64(uint64(len(x)))
		for _, i := range x {
			w.u32(uint32(i))
		}
	case []float32:
		w.u32(ggfloat32)
		w.u64(uint64(len(x)))
		for _, f := range x {
			w.u32(math.Float32bits(f))
		}
	default:
		w.err = fmt.Errorf("gguf: metadata value of type %T (tag %d) is not written", v, typ)
	}
}

// WriteTo writes the file.
func (g *gguf) WriteTo(out io.Writer) (int64, error) {
	w := &ggufWriter{w: bufio.NewWriterSize(out, 1<<20)}
	w.raw([]byte(ggufMagic))
	w.u32(ggufVersion)
	w.u64(uint64(len(g.tensors)))
	w.u64(uint64(len(g.kvs)))
	for _, kv := range g.kvs {
		w.str(kv.key)
		w.u32(kv.typ)
		w.value(kv.typ, kv.val)
	}
	var off uint64
	for _, t := range g.tensors {
		w.str(t.name)
		w.u32(uint32(len(t.dims)))
		for _, d := range t.dims {
			w.u64(d)
		}
		w.u32(t.typ)
		w.u64(off)
		off += alignUp(uint64(len(t.data)))
	}
	w.pad()
	for _, t := range g.tensors {
		w.raw(t.data)
		w.pad()
	}
	if w.err == nil {
		w.err = w.w.Flush()
	}
	return w.n, w.err
}

func alignUp(n uint64) uint64 { return (n + ggufAlignment - 1) / ggufAlignment * ggufAlignment }
