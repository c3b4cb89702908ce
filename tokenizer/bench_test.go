package tokenizer

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/testing/hfref"
)

// benchText is the whole fidelity corpus joined: code, CJK, emoji,
// whitespace, special tokens and JSON in the corpus's proportions.
func benchText() string {
	texts, _ := corpus()
	return strings.Join(texts, "\n")
}

// BenchmarkEncode measures Encode's throughput on the corpus, cold cache
// (a fresh piece cache per iteration would be unfair to both sides: the
// reference keeps its cache too, so both run warm), and in the same run
// the reference's throughput on the same text (Node.js, transformers.js),
// reported as ref-MB/s.
//
//	go test ./tokenizer -run '^$' -bench Encode -benchtime 3x
func BenchmarkEncode(b *testing.B) {
	tk := qwen3(b)
	text := benchText()
	if _, err := tk.Encode(text); err != nil { // warm, as the reference is
		b.Fatal(err)
	}
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := tk.Encode(text); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	var ref struct {
		MBPerS float64 `json:"mb_per_s"`
	}
	hfref.Run(b, "bench", map[string]any{"text": text, "seconds": 3}, &ref)
	goMB := float64(len(text)) * float64(b.N) / elapsed.Seconds() / 1e6
	b.ReportMetric(goMB, "go-MB/s")
	b.ReportMetric(ref.MBPerS, "ref-MB/s")
}

// BenchmarkEncodeParallel is Encode from every core at once (the server
// encodes for many sessions concurrently).
func BenchmarkEncodeParallel(b *testing.B) {
	tk := qwen3(b)
	text := benchText()
	b.SetBytes(int64(len(text)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := tk.Encode(text); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
