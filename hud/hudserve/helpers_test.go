package hudserve_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/berth-sh/berth/harbor/task"
	"github.com/berth-sh/berth/hud"
	"github.com/berth-sh/berth/hud/hudserve"
	"github.com/berth-sh/berth/internal/testing/harbortest"
	"github.com/berth-sh/berth/sandbox"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		tunnelHelper()
		return
	}
	goleak.VerifyTestMain(m)
}

// fixture is a hudserve.Server on the fake provider, serving one task.
type fixture struct {
	srv  *hudserve.Server
	prov *sandbox.Provider
	addr string
	task *task.Task

	mu     sync.Mutex
	events []hudserve.Event
	ch     chan hudserve.Event
}

const instruction = "Write 42 to /tmp/answer.\n"

func newFixture(t *testing.T, lim hud.Limits) *fixture {
	t.Helper()
	reg := harbortest.Registry(t, nil) // skips without root or busybox
	prov, err := reg.Open(t.Context(), "fake", harbortest.Env(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := harbortest.Task(t, t.TempDir(), "answer", harbortest.TOML("60", "60"), harbortest.SolveWrite, harbortest.TestAnswer,
		map[string]string{"instruction.md": instruction})
	tk := task.Load(dir)
	if err := tk.Err(); err != nil {
		t.Fatal(err)
	}
	f := &fixture{prov: prov, task: tk, ch: make(chan hudserve.Event, 64)}
	f.srv, err = hudserve.New(hudserve.Options{
		Provider: prov, Tasks: []*task.Task{tk}, Limits: lim, Version: "test",
		Events: func(e hudserve.Event) {
			f.mu.Lock()
			f.events = append(f.events, e)
			f.mu.Unlock()
			select {
			case f.ch <- e:
			default:
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = ln.Addr().String()
	done := make(chan struct{})
	go func() { defer close(done); _ = f.srv.Serve(ln) }()
	t.Cleanup(func() {
		f.srv.Close()
		<-done
		if n := f.srv.Sandboxes(); n != 0 {
			t.Errorf("%d sandboxes left after Close", n)
		}
		infos, _ := prov.List(context.Background(), nil)
		for _, i := range infos {
			t.Errorf("sandbox %s left on the provider", i.ID)
		}
		prov.Close()
	})
	return f
}

// waitEvent waits for the next sandbox event matching want.
func (f *fixture) waitEvent(t *testing.T, d time.Duration, want func(hudserve.Event) bool) hudserve.Event {
	t.Helper()
	timer := time.After(d)
	for {
		select {
		case e := <-f.ch:
			if want(e) {
				return e
			}
		case <-timer:
			t.Fatalf("no matching sandbox event within %v", d)
		}
	}
}

// client connects and says hello.
func (f *fixture) client(t *testing.T) *hud.Client {
	t.Helper()
	c, err := hud.DialReady(t.Context(), f.addr, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// raw is a bare TCP peer that writes frames byte for byte and reads lines.
type raw struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *raw {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &raw{t: t, c: c, r: bufio.NewReader(c)}
}

func (r *raw) send(line string) {
	r.t.Helper()
	if _, err := r.c.Write([]byte(line + "\n")); err != nil {
		r.t.Fatal(err)
	}
}

func (r *raw) line() string {
	r.t.Helper()
	_ = r.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	l, err := r.r.ReadString('\n')
	if err != nil {
		r.t.Fatalf("reading a frame: %v (got %q)", err, l)
	}
	return l[:len(l)-1]
}

// exchange sends one frame and returns the reply, parsed.
func (r *raw) exchange(line string) map[string]any {
	r.t.Helper()
	r.send(line)
	var m map[string]any
	if err := json.Unmarshal([]byte(r.line()), &m); err != nil {
		r.t.Fatal(err)
	}
	return m
}

func writeFile(t *testing.T, dir, name, body string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func contextBackground() context.Context { return context.Background() }
