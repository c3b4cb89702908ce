package session

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/session/testengine"
)

// waitBuffered waits until the server holds n bytes of bodies.
func (e *testEnv) waitBuffered(t *testing.T, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for e.srv.bounds.buffered.Load() != n {
		if time.Now().After(deadline) {
			t.Fatalf("the server holds %d bytes of bodies, want %d", e.srv.bounds.buffered.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// stalled is a request whose body stops after its first bytes.
type stalled struct {
	pw   *io.PipeWriter
	done chan error
}

// stall starts a chat request declaring size bytes and sends sent of them.
func (e *testEnv) stall(t *testing.T, id string, size, sent int64) *stalled {
	t.Helper()
	pr, pw := io.Pipe()
	req, _ := http.NewRequest(http.MethodPost, e.url+"/sessions/"+id+"/v1/chat/completions", pr)
	req.ContentLength = size
	s := &stalled{pw: pw, done: make(chan error, 1)}
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		s.done <- err
	}()
	if _, err := pw.Write(bytes.Repeat([]byte{' '}, int(sent))); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *stalled) abort() { s.pw.CloseWithError(errors.New("the harness gave up")); <-s.done }

// TestBufferedBytesBounded: the bodies in memory are counted as they
// arrive, at most twice the body limit per session and MaxBufferedBytes in
// all; past either a request is refused at once, 429 or 503 with
// Retry-After, and once the bodies held are let go the same request goes
// through. Bodies that stop half way hold only what they sent (a
// doubling buffer, never past the declared length).
func TestBufferedBytesBounded(t *testing.T) {
	const limit = 1 << 20
	e := newEnv(t, agentScript(func(testengine.Call) string { return "x" }), testengine.Options{}, func(o *Options) {
		o.MaxBodyBytes, o.MaxBufferedBytes = limit, 3*limit
	})
	one, two, three := e.create(), e.create(), e.create()
	const declared, sent = 1_000_000, 900_000
	a := e.stall(t, one, declared, sent)
	e.waitBuffered(t, declared+1)
	b := e.stall(t, one, declared, sent)
	e.waitBuffered(t, 2*(declared+1))

	small := oneUserMessage(t, "hi")
	check := func(id string, want int) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, e.url+"/sessions/"+id+"/v1/chat/completions", bytes.NewReader(append(small, bytes.Repeat([]byte{' '}, 200_000)...)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || (want != http.StatusOK && resp.Header.Get("Retry-After") == "") {
			t.Fatalf("session %s: %d %s (Retry-After %q), want %d", id[:8], resp.StatusCode, out, resp.Header.Get("Retry-After"), want)
		}
	}
	check(one, http.StatusTooManyRequests) // its session holds two bodies already
	d := e.stall(t, two, declared, sent)
	e.waitBuffered(t, 3*(declared+1))
	check(three, http.StatusServiceUnavailable) // the server holds all it may
	for _, s := range []*stalled{a, b, d} {
		s.abort()
	}
	e.waitBuffered(t, 0)
	check(three, http.StatusOK)
	check(one, http.StatusOK)
	if m := e.metricsText(t); !strings.Contains(m, "berth_session_busy_refusals_total 2") || !strings.Contains(m, "berth_session_buffered_bytes 0") {
		t.Errorf("metrics:\n%s", m)
	}
}

// TestTokenizeWaitHonoursContext: a turn that finds no room to tokenize
// waits for it (it is not refused) and goes on once room frees; a turn
// whose client goes away while waiting ends and gives its body back.
func TestTokenizeWaitHonoursContext(t *testing.T) {
	e := newEnv(t, agentScript(func(testengine.Call) string { return "x" }), testengine.Options{}, nil)
	id := e.create()
	full := e.srv.opts.MaxTokenizingBytes
	if err := e.srv.bounds.tokenizing.Acquire(t.Context(), full); err != nil {
		t.Fatal(err)
	}
	body := oneUserMessage(t, "hi")
	post := func(ctx context.Context) (int, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.url+"/sessions/"+id+"/v1/chat/completions", bytes.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}

	// A client that gives up while waiting.
	ctx, cancel := context.WithCancel(t.Context())
	gaveUp := make(chan error, 1)
	go func() { _, err := post(ctx); gaveUp <- err }()
	e.waitBuffered(t, int64(len(body))+1)
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled client: %v", err)
	}
	e.waitBuffered(t, 0)

	// A client that waits until room frees.
	got := make(chan int, 1)
	go func() { s, _ := post(t.Context()); got <- s }()
	e.waitBuffered(t, int64(len(body))+1)
	select {
	case s := <-got:
		t.Fatalf("a turn went through with no room to tokenize: %d", s)
	default:
	}
	e.srv.bounds.tokenizing.Release(full)
	if s := <-got; s != http.StatusOK {
		t.Fatalf("the waiting turn: %d", s)
	}
	e.waitBuffered(t, 0)
}
