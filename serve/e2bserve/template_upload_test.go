package e2bserve

import (
	"bytes"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/apikeys"
	"github.com/berth-sh/berth/internal/testing/tartest"
	"github.com/berth-sh/berth/serve/internal/core"
)

// slowPut PUTs to u a chunked body fed chunk bytes every tick until stop;
// the answer comes on the channel.
func slowPut(t *testing.T, u string, tick time.Duration, chunk int) (<-chan response, func()) {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	var once sync.Once
	stop := func() { once.Do(func() { close(done) }) }
	t.Cleanup(stop)
	go func() {
		defer pw.Close()
		tk := time.NewTicker(tick)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
				if _, err := pw.Write(bytes.Repeat([]byte("x"), chunk)); err != nil { // not a tar
					return // the server answered and closed the connection
				}
			}
		}
	}()
	answer := make(chan response, 1)
	go func() {
		req, err := http.NewRequest("PUT", u, pr)
		if err != nil {
			answer <- response{Status: -1, Body: []byte(err.Error())}
			return
		}
		req.ContentLength = -1
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			answer <- response{Status: -1, Body: []byte(err.Error())}
			return
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		answer <- response{Status: res.StatusCode, Header: res.Header, Body: b}
	}()
	return answer, stop
}

// keyTemplates is what the server holds of key's templates.
func (e *testEnv) keyTemplates(key string) *keyTemplates {
	e.api.tpl.mu.Lock()
	defer e.api.tpl.mu.Unlock()
	return e.api.tpl.key(apikeys.ID(key))
}

// await is the answer of a slow PUT, or a failure after limit.
func await(t *testing.T, ch <-chan response, limit time.Duration, what string) response {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(limit):
		t.Fatalf("%s: no answer after %v, the upload is still open", what, limit)
		return response{}
	}
}

// TestAttackTemplateUploadTrickle: archives sent a byte at a time, slower
// than the server's minimum rate, are cut off once the grace period has
// passed (408, naming the rate), and give back what they reserved of the
// key's upload budget and their scratch files. On 5553f78 an upload had no
// deadline: these two stayed open for the test's 20 s, each reserving the
// 256 MiB limit of the key's 2 GiB (the review's 50, a byte every 30 s,
// stayed open 210 s).
func TestAttackTemplateUploadTrickle(t *testing.T) {
	e := newLocalEnv(t, func(o *core.Options) {
		o.TemplateBuilds = core.TemplateBuildOptions{UploadGrace: 500 * time.Millisecond, MinUploadRate: 1024, MaxUploadsPerKey: 2}
	})
	tid, _ := e.requestTemplate(testKey, "trickle-"+core.NewID()[:8])
	var answers []<-chan response
	for _, h := range []string{strings.Repeat("1", 64), strings.Repeat("2", 64)} {
		_, u, r := e.fileLink(testKey, tid, h)
		if u == "" {
			t.Fatalf("file link: %d %s", r.Status, r.Body)
		}
		ch, _ := slowPut(t, u, 20*time.Millisecond, 1)
		answers = append(answers, ch)
	}
	for i, ch := range answers {
		r := await(t, ch, 20*time.Second, "a trickling upload")
		if r.Status != http.StatusRequestTimeout || !strings.Contains(string(r.Body), "slower than this server's minimum of 1 KiB/s") {
			t.Errorf("trickle %d: %d %s; want 408", i, r.Status, r.Body)
		}
	}
	k := e.keyTemplates(testKey)
	eventually(t, "the trickles' reservations given back", func() bool {
		e.api.tpl.mu.Lock()
		defer e.api.tpl.mu.Unlock()
		return k.pending == 0 && len(k.turns) == 0
	})
	left, _ := filepath.Glob(filepath.Join(e.api.tpl.dir, "uploads", apikeys.ID(testKey), ".upload-*"))
	if len(left) != 0 {
		t.Fatalf("scratch files left: %v", left)
	}
	// An upload at full speed still goes through.
	if _, r := e.upload(testKey, tid, gzipped(t, tartest.Build(t, tartest.File("a.txt", "a")))); r.Status != http.StatusOK {
		t.Fatalf("a normal upload: %d %s", r.Status, r.Body)
	}
}

// TestAttackTemplateUploadsInFlight: one key has at most MaxUploadsPerKey
// uploads being received; one more waits for a turn for the grace period
// and is then answered 429 with Retry-After, however fast the others send;
// once they end, uploads are taken again. On 5553f78 nothing bounded them:
// the third upload was read as the first two were.
func TestAttackTemplateUploadsInFlight(t *testing.T) {
	e := newLocalEnv(t, func(o *core.Options) {
		o.TemplateBuilds = core.TemplateBuildOptions{UploadGrace: 500 * time.Millisecond, MinUploadRate: 1024, MaxUploadsPerKey: 2}
	})
	tid, _ := e.requestTemplate(testKey, "inflight-"+core.NewID()[:8])
	link := func(h string) string {
		_, u, r := e.fileLink(testKey, tid, h)
		if u == "" {
			t.Fatalf("file link: %d %s", r.Status, r.Body)
		}
		return u
	}
	var stops []func()
	var answers []<-chan response
	for _, h := range []string{strings.Repeat("1", 64), strings.Repeat("2", 64)} {
		ch, stop := slowPut(t, link(h), 5*time.Millisecond, 4096) // well above the minimum rate
		answers, stops = append(answers, ch), append(stops, stop)
	}
	k := e.keyTemplates(testKey)
	eventually(t, "two uploads being received", func() bool {
		e.api.tpl.mu.Lock()
		defer e.api.tpl.mu.Unlock()
		return len(k.turns) == 2
	})
	third, _ := slowPut(t, link(strings.Repeat("3", 64)), 5*time.Millisecond, 4096)
	r := await(t, third, 20*time.Second, "a third upload")
	if r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" || !strings.Contains(string(r.Body), "2 uploads in flight") {
		t.Fatalf("a third upload: %d %v %s; want 429 with Retry-After", r.Status, r.Header, r.Body)
	}
	for i, stop := range stops {
		stop() // the body ends: not an archive
		if r := await(t, answers[i], 20*time.Second, "a streaming upload"); r.Status != http.StatusBadRequest {
			t.Errorf("streaming upload %d after its end: %d %s", i, r.Status, r.Body)
		}
	}
	if _, r := e.upload(testKey, tid, gzipped(t, tartest.Build(t, tartest.File("a.txt", "a")))); r.Status != http.StatusOK {
		t.Fatalf("an upload after the others ended: %d %s", r.Status, r.Body)
	}
}
