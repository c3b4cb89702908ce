package session

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/berth-sh/berth/session/heaptest"
	"github.com/berth-sh/berth/session/testengine"
)

// The attacks of a hostile harness on the session server's memory (issue
// 24, hole 5). Each test says what happened on 5553f78.

// send posts body (of length n, or chunked when n < 0) and returns the
// status and reply.
func send(t testing.TB, url string, body io.Reader, n int64) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = n
	return do(t, req)
}

// bytesOf is n bytes of b, made as they are read.
type bytesOf struct {
	b byte
	n int64
}

func (r *bytesOf) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.n)]
	for i := range p {
		p[i] = r.b
	}
	r.n -= int64(len(p))
	return len(p), nil
}

// oneUserMessage is a chat body whose one message is text.
func oneUserMessage(t testing.TB, text string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"messages": []any{map[string]any{"role": "user", "content": text}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAttackBodyOverLimitRefusedUnread: a body declared longer than the
// limit (32 MiB by default) is answered 413, naming the limit, before a
// byte of it is read. On 5553f78 the server read the first 32 MiB into
// memory before refusing (73 MB allocated). A chunked body over the limit
// is read up to the limit and refused the same way.
func TestAttackBodyOverLimitRefusedUnread(t *testing.T) {
	e := newEnv(t, agentScript(func(testengine.Call) string { return "x" }), testengine.Options{}, nil)
	id := e.create()
	url := e.url + "/sessions/" + id + "/v1/chat/completions"
	const n = 40 << 20
	var status int
	var reply []byte
	got := heaptest.Allocated(func() { status, reply = send(t, url, &bytesOf{'a', n}, n) })
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(errorOf(t, reply), "33554432") {
		t.Fatalf("declared %d bytes: %d %s", n, status, reply)
	}
	if got > 4<<20 {
		t.Errorf("refusing a declared %d MB body allocated %d MB", n>>20, got>>20)
	}
	status, reply = send(t, url, &bytesOf{'a', n}, -1)
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(errorOf(t, reply), "33554432") {
		t.Fatalf("chunked: %d %s", status, reply)
	}
}

// TestAttackHugeBodyUnderLimit is the body: 29 MB of text in one
// message, under the body limit and far over the session's 1 Mi tokens.
// On 5553f78 it was all parsed, rendered and tokenized (7.6 million ids)
// before the count was checked: the heap grew by 530 MB (heaptest's
// reading, the collector kept close behind). Now tokenizing stops at the
// limit, and the heap grows by less than 10 times the body (about 180 MB:
// parsing and rendering it still cost that).
func TestAttackHugeBodyUnderLimit(t *testing.T) {
	e := newEnv(t, agentScript(func(testengine.Call) string { return "x" }), testengine.Options{}, nil)
	id := e.create()
	body := oneUserMessage(t, strings.Repeat("hello world, this is some text. ", 29<<20/32))
	var status int
	var reply []byte
	grew := heaptest.Growth(func() {
		status, reply = send(t, e.url+"/sessions/"+id+"/v1/chat/completions", bytes.NewReader(body), int64(len(body)))
	})
	if status != http.StatusBadRequest || !strings.Contains(errorOf(t, reply), "1048576") {
		t.Fatalf("%d %s", status, reply)
	}
	t.Logf("a %d MB body: the heap grew %d MB", len(body)>>20, grew>>20)
	if grew > 10*uint64(len(body)) {
		t.Errorf("a %d MB body grew the heap %d MB", len(body)>>20, grew>>20)
	}
	// The session is as it was: the next turn is its first.
	msgs := []any{map[string]any{"role": "user", "content": "hi"}}
	e.chat(id, msgs, nil, false)
}

// TestAttackManyHugeBodiesAtOnce: 16 harnesses each send a body of nearly
// the limit (here 4 MiB, with a session limit of 64 Ki tokens) at once.
// On 5553f78 all 16 were parsed and tokenized at once, each costing some
// 25 times its size (six 29 MB bodies took the server to 3.7 GB): the
// heap grew by 1.7 GB here. Now the bodies wait for room to tokenize, one
// limit's worth at a time, and the heap grows by a few times what the
// bodies weigh (each is read into a doubling buffer).
func TestAttackManyHugeBodiesAtOnce(t *testing.T) {
	const n, limit = 16, 4 << 20
	e := newEnv(t, agentScript(func(testengine.Call) string { return "x" }), testengine.Options{}, func(o *Options) {
		o.MaxBodyBytes, o.MaxSessionTokens = limit, 64<<10
	})
	body := oneUserMessage(t, strings.Repeat("hello world, this is some text. ", (limit-1024)/32))
	ids := make([]string, n)
	for i := range ids {
		ids[i] = e.create()
	}
	statuses := make([]int, n)
	grew := heaptest.Growth(func() {
		var wg sync.WaitGroup
		for i, id := range ids {
			wg.Go(func() {
				statuses[i], _ = send(goroutineTB{t}, e.url+"/sessions/"+id+"/v1/chat/completions", bytes.NewReader(body), int64(len(body)))
			})
		}
		wg.Wait()
	})
	for i, s := range statuses {
		if s != http.StatusBadRequest {
			t.Errorf("request %d: %d, want 400 (too many tokens)", i, s)
		}
	}
	t.Logf("%d bodies of %d MB at once: the heap grew %d MB", n, len(body)>>20, grew>>20)
	if bound := uint64(5 * n * len(body)); grew > bound {
		t.Errorf("%d bodies of %d MB at once grew the heap %d MB, more than %d MB", n, len(body)>>20, grew>>20, bound>>20)
	}
}

// TestAttackContentObjectIs400: a message whose content is an object (not
// a string, null or a list of parts) is a bad request. On 5553f78 it went
// to the chat template and came back 500, as if the server had failed.
func TestAttackContentObjectIs400(t *testing.T) {
	e := newEnv(t, agentScript(func(testengine.Call) string { return "x" }), testengine.Options{}, nil)
	id := e.create()
	for _, content := range []any{map[string]any{"text": "hi"}, map[string]any{}, 42, true} {
		status, body := e.post("/sessions/"+id+"/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": content}}})
		if status != http.StatusBadRequest || !strings.Contains(errorOf(t, body), "content") {
			t.Errorf("content %v: %d %s", content, status, body)
		}
	}
	status, body := e.post("/sessions/"+id+"/v1/messages", map[string]any{"max_tokens": 8, "messages": []any{map[string]any{"role": "user", "content": map[string]any{"text": "hi"}}}})
	if status != http.StatusBadRequest {
		t.Errorf("Anthropic content object: %d %s", status, body)
	}
	e.chat(id, []any{map[string]any{"role": "user", "content": "hi"}}, nil, false) // the session is unharmed
}
