package llamatest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/testing/qwen3test"
)

// BenchmarkEngine measures the real engine on the tier's model, with one
// evaluation thread and with two: seconds to start (the generated model in
// the cache: load, first answer), and output tokens a second over turns of
// up to 64 tokens (the model stops at <|im_end|> about one token in
// ten), one session at a time and eight at once, each session's prompt
// growing by its replies as in a rollout.
func BenchmarkEngine(b *testing.B) {
	c := qwen3test.Codec(b)
	Model(b, Params{}) // generated before any clock starts
	prompt, _ := c.Tok.Encode("<|im_start|>user\nWrite a long story about a ship.<|im_end|>\n<|im_start|>assistant\n")
	for _, threads := range []int{1, 2} {
		start := time.Now()
		e := Start(b, Options{Sequences: 8, Threads: threads})
		turn(b, e, "warm", prompt, map[string]any{"max_tokens": 1})
		startS := time.Since(start).Seconds()
		b.Run(fmt.Sprintf("threads=%d/start", threads), func(b *testing.B) { b.ReportMetric(startS, "start-s") })
		for _, sessions := range []int{1, 8} {
			b.Run(fmt.Sprintf("threads=%d/sessions=%d", threads, sessions), func(b *testing.B) { decode(b, e, prompt, sessions) })
		}
	}
}

// decode runs b.N turns over sessions at once and reports tokens a second.
func decode(b *testing.B, e *Engine, prompt []int, sessions int) {
	var mu sync.Mutex
	tokens := 0
	var wg sync.WaitGroup
	for s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := prompt
			for i := s; i < b.N; i += sessions {
				rep, err := rawTurn(e, fmt.Sprint("bench", s), ids, map[string]any{"max_tokens": 64, "seed": i + 1})
				if err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				tokens += len(rep.OutputIDs)
				mu.Unlock()
				ids = append(append(ids[:len(ids):len(ids)], rep.OutputIDs...), prompt...)
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tok/s")
	b.ReportMetric(float64(tokens)/float64(b.N), "tok/turn")
}
