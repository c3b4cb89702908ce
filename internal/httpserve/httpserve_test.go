package httpserve

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A call in flight when ctx ends finishes within the grace, and Serve
// returns nil; a new connection is refused after.
func TestServeGraceful(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		time.Sleep(200 * time.Millisecond)
		io.WriteString(w, "done")
	})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	before := make(chan struct{})
	go func() {
		served <- Serve(ctx, ln, h, Options{Grace: 5 * time.Second, BeforeShutdown: func() { close(before) }})
	}()
	got := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String())
		if err != nil {
			got <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- string(b)
	}()
	<-started
	cancel()
	if s := <-got; s != "done" {
		t.Fatalf("the call in flight got %q", s)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	<-before
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Fatal("the listener still accepts after the stop")
	}
}

// A client that never finishes its headers is cut off instead of holding
// a connection (slow loris).
func TestHeaderLimit(t *testing.T) {
	hs := NewServer(http.NotFoundHandler(), 0)
	if hs.ReadHeaderTimeout <= 0 || hs.MaxHeaderBytes != 64<<10 {
		t.Fatalf("limits: %v %d", hs.ReadHeaderTimeout, hs.MaxHeaderBytes)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(ln)
	defer hs.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", 70<<10)+"\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, _ := io.ReadAll(c)
	if !strings.Contains(string(b), "431") {
		t.Fatalf("oversized headers answered %q", b)
	}
}
