package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/session/engine"
	"github.com/berth-sh/berth/session/testengine"
)

// BenchmarkTurn8k measures what the session server adds to a turn at an
// 8k-token context: in turns, one call straight to the test engine (the
// body the server would send, input_ids included) and one through the
// server (the client's body; the server matches the history, rolls back
// the previous try, renders and tokenizes the increment, calls the engine,
// checks the prefix invariant and commits). The second is a retry of the
// same request, so the context stays at 8k. Reported: the p50 and p95 of
// each and the p50 added by the server.
//
//	go test ./session -run '^$' -bench Turn8k -benchtime 300x
func BenchmarkTurn8k(b *testing.B) {
	reply := "Checking.\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls -la /tmp\"}}\n</tool_call>"
	e := newEnv(b, func(testengine.Call) testengine.Reply { return testengine.Reply{Text: reply} }, testengine.Options{}, nil)
	id := e.create()
	out := strings.Repeat("drwxr-xr-x 2 root root 4096 Jan  1 00:00 directory-name-λ 12345\n", 60)
	msgs := []any{
		map[string]any{"role": "system", "content": "You are an agent in a sandbox. " + strings.Repeat("Follow the rules. ", 40)},
		map[string]any{"role": "user", "content": "List everything."},
	}
	// Grow the conversation until a turn's prompt reaches 8k tokens; that
	// turn's request (msgs) is the one retried below.
	for {
		asst := e.chat(id, msgs, agentTools, false)
		recs := e.srv.recordsOf(b, id)
		if len(recs[len(recs)-1].PromptIDs) >= 8000 {
			break
		}
		result := toolResults("b", len(msgs), asst)[0].(map[string]any)
		result["content"] = out
		msgs = append(msgs, asst, result)
	}
	recs := e.srv.recordsOf(b, id)
	last := recs[len(recs)-1]
	direct, _ := json.Marshal(engine.RequestBody(engine.SGLang, &engine.Request{Body: last.Request, PromptIDs: last.PromptIDs}))
	viaServer, _ := json.Marshal(map[string]any{"model": "qwen3", "messages": msgs, "tools": agentTools, "temperature": 0})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	post := func(url string, body []byte, header ...string) time.Duration {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		d := time.Since(start)
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("%s: %d %s", url, resp.StatusCode, data)
		}
		return d
	}
	// Warm both paths.
	for range 5 {
		post(e.engURL+"/v1/chat/completions", direct, engine.RoutingHeader, id)
		post(e.url+"/sessions/"+id+"/v1/chat/completions", viaServer)
	}
	var ds, ss []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ds = append(ds, post(e.engURL+"/v1/chat/completions", direct, engine.RoutingHeader, id))
		ss = append(ss, post(e.url+"/sessions/"+id+"/v1/chat/completions", viaServer))
	}
	b.StopTimer()
	if n := len(e.srv.recordsOf(b, id)); n != len(recs) {
		b.Fatalf("the retried turn did not stay one turn: %d records, had %d", n, len(recs))
	}
	pct := func(xs []time.Duration, p float64) float64 {
		s := slices.Clone(xs)
		slices.Sort(s)
		return float64(s[int(p*float64(len(s)-1))].Microseconds()) / 1000
	}
	added := make([]time.Duration, len(ds))
	for i := range ds {
		added[i] = ss[i] - ds[i]
	}
	b.ReportMetric(float64(len(last.PromptIDs)), "context-tokens")
	b.ReportMetric(pct(ds, .5), "direct-p50-ms")
	b.ReportMetric(pct(ss, .5), "server-p50-ms")
	b.ReportMetric(pct(ds, .95), "direct-p95-ms")
	b.ReportMetric(pct(ss, .95), "server-p95-ms")
	b.ReportMetric(pct(added, .5), "added-p50-ms")
	b.ReportMetric(0, "ns/op")
	if testing.Verbose() {
		fmt.Printf("context %d tokens, %d turns each way\n", len(last.PromptIDs), len(ds))
	}
}
