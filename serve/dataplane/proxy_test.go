package dataplane

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth/sandbox"
)

// recordHandler keeps the records it is given.
type recordHandler struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordHandler) WithGroup(string) slog.Handler            { return h }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r)
	return nil
}

// TestProxyLogsToLogger: a stream the sandbox ends early is reported to the
// server's logger at debug level, not printed on the standard logger.
func TestProxyLogsToLogger(t *testing.T) {
	// An envd that promises 100 bytes and hangs up after 5.
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort")
		buf.Flush()
	}))
	defer upstream.Close()

	var std bytes.Buffer
	old := log.Writer()
	log.SetOutput(&std)
	defer log.SetOutput(old)

	h := &recordHandler{}
	px, err := NewProxy(sandbox.EnvdEndpoint{BaseURL: upstream.URL}, ProxyOptions{Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(px)
	defer front.Close()
	res, err := http.Get(front.URL + "/files?path=/x")
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(bufio.NewReader(res.Body))
	res.Body.Close()
	if err == nil {
		t.Fatal("a body cut short upstream was read whole")
	}
	front.Close() // the handler has returned: everything it logs is in

	if std.Len() != 0 {
		t.Fatalf("the proxy wrote to the standard logger: %q", std.String())
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var found bool
	for _, r := range h.recs {
		if strings.Contains(r.Message, "read error during body copy") {
			found = true
			if r.Level != slog.LevelDebug {
				t.Fatalf("logged at %v, want debug: %q", r.Level, r.Message)
			}
		}
	}
	if !found {
		t.Fatalf("the early end was not logged to the logger: %d records", len(h.recs))
	}
}

// lateRead delays every read of a request body after the first, as a
// transport's writer goroutine that is scheduled late does.
type lateRead struct {
	io.ReadCloser
	n int
}

func (l *lateRead) Read(p []byte) (int, error) {
	if l.n++; l.n > 1 {
		time.Sleep(50 * time.Millisecond)
	}
	return l.ReadCloser.Read(p)
}

// TestProxyStreamOutlivesRequestBody: a Connect server stream must reach
// its end even when the sandbox answers before the transport has made its
// last read of the request body (it reads once more after Content-Length
// bytes, to check there are no more). The HTTP server, writing the
// proxied headers, would otherwise discard and close the request body
// under the transport, whose next read fails, and the transport would
// drop the connection mid-stream ("terminated" in the JS SDK).
func TestProxyStreamOutlivesRequestBody(t *testing.T) {
	const msg = "one request message"
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, len(msg))
		if _, err := io.ReadFull(r.Body, buf); err != nil {
			t.Error(err)
			return
		}
		for i := range 20 {
			fmt.Fprintf(w, "frame %d\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(5 * time.Millisecond)
		}
	}))
	defer upstream.Close()
	px, err := NewProxy(sandbox.EnvdEndpoint{BaseURL: upstream.URL}, ProxyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = &lateRead{ReadCloser: r.Body}
		px.ServeHTTP(w, r)
	}))
	defer front.Close()
	res, err := http.Post(front.URL+"/process.Process/Start", "application/connect+json", strings.NewReader(msg))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || !strings.HasSuffix(string(b), "frame 19\n") {
		t.Fatalf("stream cut: %v after %q", err, b)
	}
}
