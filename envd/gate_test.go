package envd

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/berth-sh/berth/envd/envdproto"
	"github.com/berth-sh/berth/sandbox/driver"
)

// slotBackend checks, from inside each call, whether the gate's one slot
// is held; the methods the tests do not call are the nil Backend's.
type slotBackend struct {
	Backend
	t   *testing.T
	sem *semaphore.Weighted
}

// held reports whether the slot is taken, leaving it as it was.
func held(sem *semaphore.Weighted) bool {
	if sem.TryAcquire(1) {
		sem.Release(1)
		return false
	}
	return true
}

func (b slotBackend) Stat(context.Context, string) (envdproto.EntryInfo, error) {
	if !held(b.sem) {
		b.t.Error("Stat ran without the slot")
	}
	return envdproto.EntryInfo{Name: "x"}, nil
}

func (b slotBackend) Write(_ context.Context, _, _ string, r io.Reader, _ *uint32) error {
	buf := make([]byte, 1)
	for {
		if !held(b.sem) {
			b.t.Error("Write's file work ran without the slot")
		}
		if _, err := r.Read(buf); err != nil {
			return nil
		}
	}
}

func (b slotBackend) Open(context.Context, string) (Download, error) {
	if !held(b.sem) {
		b.t.Error("Open ran without the slot")
	}
	return Download{ReadCloser: io.NopCloser(&slotReader{b, strings.NewReader("abc")}), Size: 3}, nil
}

// slotReader is a file: the slot must be held while it is read.
type slotReader struct {
	b slotBackend
	r io.Reader
}

func (r *slotReader) Read(p []byte) (int, error) {
	if !held(r.b.sem) {
		r.b.t.Error("a file was read without the slot")
	}
	return r.r.Read(p[:min(len(p), 1)])
}

// clientBody is a request's body: the slot must be free while it is read.
type clientBody struct {
	t   *testing.T
	sem *semaphore.Weighted
	r   io.Reader
}

func (c *clientBody) Read(p []byte) (int, error) {
	if held(c.sem) {
		c.t.Error("the slot was held while the client's body was read")
	}
	return c.r.Read(p[:min(len(p), 1)])
}

// The gate holds its slot for file work and gives it back while a body
// comes from (or goes to) the client; a call that cannot get a slot before
// its ctx ends fails without running.
func TestGatedHoldsSlotOnlyForFileWork(t *testing.T) {
	sem := semaphore.NewWeighted(1)
	g := gated{b: slotBackend{t: t, sem: sem}, sem: sem}
	ctx := ctxT(t)
	if _, err := g.Stat(ctx, "/x"); err != nil {
		t.Fatal(err)
	}
	body := &clientBody{t: t, sem: sem, r: strings.NewReader("body")}
	if err := g.Write(ctx, "", "/x", body, nil); err != nil {
		t.Fatal(err)
	}
	d, err := g.Open(ctx, "/x")
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	buf := make([]byte, 8)
	for {
		n, err := d.Read(buf)
		got.Write(buf[:n])
		if held(sem) {
			t.Error("the slot was held between two reads of a download")
		}
		if err != nil {
			break
		}
	}
	d.Close()
	if got.String() != "abc" {
		t.Errorf("download read %q", got.String())
	}
	if held(sem) {
		t.Fatal("the slot is still held after the calls")
	}

	sem.Acquire(ctx, 1)
	defer sem.Release(1)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := g.Stat(short, "/x"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Stat with every slot taken: %v, want the ctx's end", err)
	}
}

// NewServer puts ServerOptions.Blocking in front of the host: with its
// only slot taken, a file call waits, and goes through once it is free.
func TestServerBlockingOption(t *testing.T) {
	sem := semaphore.NewWeighted(1)
	e := unixEnv(t, ServerOptions{Blocking: sem})
	ctx := ctxT(t)
	sem.Acquire(ctx, 1)
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := e.client.Stat(short, "/"); err == nil {
		t.Fatal("a stat ran while the only slot was taken")
	}
	sem.Release(1)
	if _, err := e.client.Stat(ctx, "/"); err != nil {
		t.Fatalf("stat once the slot is free: %v", err)
	}
}

// threads is the number of OS threads of this process.
func threads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads in /proc/self/status")
	return 0
}

// A running command costs the server no OS thread: its end is awaited in
// the netpoller, not in a waitid(2) that blocks a thread for its whole
// life (which the agent could not afford with the pids limit reached).
func TestRunningCommandsHoldNoThread(t *testing.T) {
	if _, err := os.Stat("/proc/self/fdinfo"); err != nil {
		t.Skip("no /proc here")
	}
	e := unixEnv(t, ServerOptions{})
	ctx := ctxT(t)
	const n = 40
	// Warm up: the server's and client's own goroutines make their threads.
	for range 3 {
		if p, err := e.client.Exec(ctx, driver.Command{Args: []string{"true"}}); err == nil {
			p.Wait(ctx)
		}
	}
	before := threads(t)
	for i := range n {
		var out lineWaiter
		out.ch = make(chan struct{})
		p, err := e.client.Exec(ctx, driver.Command{Args: []string{"sh", "-c", "echo up; exec sleep 60"}, Stdout: &out})
		if err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
		defer p.Signal(context.Background(), driver.SIGKILL)
		select {
		case <-out.ch:
		case <-ctx.Done():
			t.Fatal("a command never said it was up")
		}
	}
	// The server waits for each right after starting it; a thread per
	// command would show up within moments.
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		if got := threads(t); got-before >= n/2 {
			t.Fatalf("%d running commands took %d more threads (%d before)", n, got-before, before)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// They still end, and their end is seen.
	p, err := e.client.Exec(ctx, driver.Command{Args: []string{"sh", "-c", "sleep 0.1; exit 7"}})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(ctx); err != nil || code != 7 {
		t.Errorf("a command's end: %d %v, want 7", code, err)
	}
}

// lineWaiter closes ch at its first write.
type lineWaiter struct {
	ch   chan struct{}
	done bool
}

func (w *lineWaiter) Write(p []byte) (int, error) {
	if !w.done {
		w.done = true
		close(w.ch)
	}
	return len(p), nil
}
