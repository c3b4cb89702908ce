package command

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

const upstreamKey = "sk-SECRET-relay-5b1f"

// upstream records what reaches the endpoint.
type upstream struct {
	mu   sync.Mutex
	seen []string // "METHOD PATH?QUERY auth=... xkey=..."
}

func newUpstream(t *testing.T) (*upstream, *httptest.Server) {
	u := &upstream{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.seen = append(u.seen, fmt.Sprintf("%s %s auth=%s xkey=%s body=%s", r.Method, r.URL.RequestURI(), r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"), body))
		u.mu.Unlock()
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(ts.Close)
	return u, ts
}

func (u *upstream) take() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	s := u.seen
	u.seen = nil
	return s
}

// rawRequest sends path exactly as written (no client-side cleaning) and
// returns the status code.
func rawRequest(t *testing.T, addr, method, path, auth string) int {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: x\r\n%sContent-Length: 2\r\nConnection: close\r\n\r\n{}", method, path, auth)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// The relay takes the sandbox's token and nothing else, serves only the
// model API under /v1/ of the endpoint's base (no walking out to a
// session server's control routes or another session), and swaps the
// token for the endpoint's key, which the sandbox never sees.
func TestRelayConfinesAndSwapsTheKey(t *testing.T) {
	up, ts := newUpstream(t)
	r, err := newRelay(ts.URL+"/sessions/abc/v1", upstreamKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	bearer := "Authorization: Bearer " + r.token + "\r\n"

	if code := rawRequest(t, r.addr(), "POST", "/v1/chat/completions?x=1", bearer); code != 200 {
		t.Fatalf("chat through the relay: %d", code)
	}
	if code := rawRequest(t, r.addr(), "POST", "/v1/messages", "X-Api-Key: "+r.token+"\r\n"); code != 200 {
		t.Fatalf("anthropic messages with x-api-key: %d", code)
	}
	got := up.take()
	want := []string{
		"POST /sessions/abc/v1/chat/completions?x=1 auth=Bearer " + upstreamKey + " xkey= body={}",
		"POST /sessions/abc/v1/messages auth=Bearer " + upstreamKey + " xkey= body={}",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the endpoint saw\n%q\nwant\n%q", got, want)
	}

	for _, c := range []struct {
		method, path, auth string
		code               int
	}{
		{"POST", "/v1/chat/completions", "", 401},
		{"POST", "/v1/chat/completions", "Authorization: Bearer " + upstreamKey + "\r\n", 401},
		{"POST", "/v1/chat/completions", "Authorization: Bearer " + r.token + "x\r\n", 401},
		{"POST", "/sessions", bearer, 403},
		{"GET", "/v1/../../", bearer, 403},
		{"DELETE", "/v1/../../abc", bearer, 403},
		{"GET", "/v1/%2e%2e/%2e%2e/other/samples", bearer, 403},
		{"GET", "/v1/..%2f..%2fother", bearer, 403},
		{"GET", "/v1//x", bearer, 403},
		{"GET", "/metrics", bearer, 403},
		{"GET", "/v1", bearer, 403},
	} {
		if code := rawRequest(t, r.addr(), c.method, c.path, c.auth); code != c.code {
			t.Errorf("%s %s (%q): %d, want %d", c.method, c.path, c.auth, code, c.code)
		}
	}
	if got := up.take(); len(got) != 0 {
		t.Fatalf("refused requests reached the endpoint: %q", got)
	}
	if r.requests.Load() != 2 {
		t.Fatalf("counted %d requests, want 2", r.requests.Load())
	}
}

// An endpoint that is down is a 502 whose text names nothing of it.
func TestRelayEndpointDown(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	r, err := newRelay("http://"+dead+"/v1", upstreamKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	req, _ := http.NewRequest("POST", "http://"+r.addr()+"/v1/chat/completions", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+r.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || strings.Contains(string(b), dead) || strings.Contains(string(b), upstreamKey) {
		t.Fatalf("%d %q", resp.StatusCode, b)
	}
}

func TestNewChecksOptions(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{APIBase: "http://h/v1"}, "needs a command line"},
		{Options{Command: "x", APIBase: "ftp://h"}, "not an http(s) base URL"},
		{Options{Command: "x", APIBase: "https://u:sk-SECRET@h/v1"}, "holds a credential"},
		{Options{Command: "x", APIBase: "http://h/v1", ExternalBase: "h:1"}, "external URL"},
		{Options{Command: "x", APIBase: "http://h/v1", Port: 70000}, "port"},
	} {
		_, err := New(c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "sk-SECRET") {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
	a, err := New(Options{Command: "x", APIBase: "http://h:8000/sessions/abc", ExternalBase: "https://gw.example/sessions/abc/v1/"})
	if err != nil {
		t.Fatal(err)
	}
	if a.o.APIBase != "http://h:8000/sessions/abc/v1" || a.o.ExternalBase != "https://gw.example/sessions/abc/v1" || a.o.Port != DefaultPort {
		t.Fatalf("%+v", a.o)
	}
}

// A sandbox holds at most maxInFlight requests open at once; the next is
// answered 429 (OpenAI clients back off), and a slot frees when a request
// ends.
func TestRelayBoundsRequestsInFlight(t *testing.T) {
	release := make(chan struct{})
	var arrived sync.WaitGroup
	arrived.Add(maxInFlight)
	var n atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= maxInFlight {
			arrived.Done()
			<-release
		}
	}))
	defer ts.Close()
	r, err := newRelay(ts.URL+"/v1", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	post := func() int {
		req, _ := http.NewRequest("POST", "http://"+r.addr()+"/v1/chat/completions", strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+r.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	codes := make(chan int, maxInFlight)
	for range maxInFlight {
		go func() { codes <- post() }()
	}
	arrived.Wait()
	if code := post(); code != http.StatusTooManyRequests {
		t.Fatalf("request %d: %d, want 429", maxInFlight+1, code)
	}
	close(release)
	for range maxInFlight {
		if code := <-codes; code != 200 {
			t.Fatalf("a request in bounds: %d", code)
		}
	}
	if code := post(); code != 200 {
		t.Fatalf("after the others ended: %d", code)
	}
}
