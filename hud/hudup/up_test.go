package hudup_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/hud"
	"github.com/berth-sh/berth/hud/hudup"
	"github.com/berth-sh/berth/internal/syncbuf"
	"github.com/berth-sh/berth/internal/testing/fakeprovider"
	"github.com/berth-sh/berth/internal/testing/nettest"
	"github.com/berth-sh/berth/internal/testing/testbin"
	"github.com/berth-sh/berth/internal/testing/waitfor"
	"github.com/berth-sh/berth/providers/modal"
	"github.com/berth-sh/berth/providers/modal/modaltest"
	"github.com/berth-sh/berth/sandbox"
)

func TestMain(m *testing.M) { testbin.Main(m) }

// The fake provider's sandboxes run host programs and share the host's
// loopback, so these tests need no root; the local provider's run is
// cmd/berth's TestHUDUp.

func fakeProvider(t *testing.T) *sandbox.Provider {
	t.Helper()
	d, err := fakeprovider.New(fakeprovider.Options{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	p := sandbox.NewProvider("fake", d)
	t.Cleanup(func() { p.Close() })
	return p
}

func hudenv(t *testing.T) string {
	t.Helper()
	bin, err := testbin.Static("hud", "github.com/berth-sh/berth/internal/testing/hudenv")
	if errors.Is(err, exec.ErrNotFound) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func live(t *testing.T, p *sandbox.Provider) []sandbox.Info {
	t.Helper()
	infos, err := p.List(context.Background(), map[string]string{"berth.launcher": hudup.LabelLauncher})
	if err != nil {
		t.Fatal(err)
	}
	return infos
}

// modalProvider is the Modal provider against its in-process server,
// whose sandboxes run host programs and whose tcp tunnels are real
// listeners: Up must declare the port at create for Modal to open it.
func modalProvider(t *testing.T) *sandbox.Provider {
	t.Helper()
	srv := modaltest.New(t, modaltest.Options{})
	srv.PointSDK(t)
	d, err := modal.New(modal.Options{TokenID: srv.TokenID(), TokenSecret: srv.TokenSecret(), Getenv: os.Getenv})
	if err != nil {
		t.Fatal(err)
	}
	p := sandbox.NewProvider("modal", d)
	t.Cleanup(func() { p.Close() })
	return p
}

// Up returns once the server answers hello on the port's endpoint; a HUD
// client then uses the URL; Run returns nil when its context ends, and
// Delete leaves nothing. On the fake provider and on Modal's in-process
// server (a tcp tunnel to the declared port).
func TestUp(t *testing.T) {
	for _, c := range []struct {
		name string
		open func(*testing.T) *sandbox.Provider
	}{{"fake", fakeProvider}, {"modal", modalProvider}} {
		t.Run(c.name, func(t *testing.T) { testUp(t, c.open(t)) })
	}
}

func testUp(t *testing.T, p *sandbox.Provider) {
	bin, port := hudenv(t), nettest.FreePort(t)
	var out syncbuf.Buffer
	env, err := hudup.Up(t.Context(), hudup.Options{
		Provider: p, Image: "any", Port: port, Output: &out, ReadyTimeout: time.Minute,
		Command: fmt.Sprintf("printf 'one The first task\\n' > env.py && exec %s serve env.py --host 127.0.0.1 --port %d", bin, port),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(env.URL(), "tcp://127.0.0.1:") || env.Manifest().Env.Name != "hudenv-test" {
		t.Fatalf("URL %q, manifest %+v", env.URL(), env.Manifest())
	}
	// Output streams beside readiness (Modal polls it separately), so it
	// may arrive a moment after hello.
	waitfor.Until(t, 10*time.Second, "the server's output in Options.Output", func() bool {
		return strings.Contains(out.String(), fmt.Sprintf("HUD_SERVE_PORT=%d", port))
	})
	if l := live(t, p); len(l) != 1 || l[0].ID != env.SandboxID() {
		t.Fatalf("sandboxes while up: %+v", l)
	}
	c, err := hud.Dial(t.Context(), env.URL())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Hello(t.Context(), ""); err != nil {
		t.Fatal(err)
	}
	tasks, err := c.ListTasks(t.Context())
	if err != nil || len(tasks) != 1 || tasks[0].ID != "one" || tasks[0].Description != "The first task" {
		t.Fatalf("tasks.list: %+v %v", tasks, err)
	}
	c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if err := env.Run(ctx); err != nil {
		t.Fatalf("Run until its context ends: %v", err)
	}
	if err := env.Delete(t.Context()); err != nil {
		t.Fatal(err)
	}
	if l := live(t, p); len(l) != 0 {
		t.Fatalf("sandboxes after Delete: %+v", l)
	}
}

// A server that exits before hello fails Up with its exit code and
// output, and its sandbox is gone; one that exits while serving ends Run
// with an error.
func TestUpServerExits(t *testing.T) {
	p := fakeProvider(t)
	_, err := hudup.Up(t.Context(), hudup.Options{Provider: p, Image: "any", Port: nettest.FreePort(t), Command: "echo no env.py here >&2; exit 3"})
	if sandbox.ClassOf(err) != sandbox.Unavailable || !strings.Contains(err.Error(), "exited with code 3 before answering hello") ||
		!strings.Contains(err.Error(), "no env.py here") {
		t.Fatalf("Up: %v", err)
	}
	if l := live(t, p); len(l) != 0 {
		t.Fatalf("a failed Up left %+v", l)
	}

	bin, port := hudenv(t), nettest.FreePort(t)
	marker := t.TempDir() + "/stop"
	env, err := hudup.Up(t.Context(), hudup.Options{
		Provider: p, Image: "any", Port: port, ReadyTimeout: time.Minute,
		// The server runs until the test creates the marker.
		Command: fmt.Sprintf("echo 'a A' > env.py; %s serve env.py --host 127.0.0.1 --port %d & while [ ! -e %s ]; do sleep 0.05; done; kill $!; exit 7", bin, port, marker),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Delete(context.Background())
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := env.Run(ctx); err == nil || !strings.Contains(err.Error(), "exited with code 7 while serving") {
		t.Fatalf("Run after the server exited: %v", err)
	}
}

// A peer on the port that accepts and never answers hello holds Up for at
// most ReadyTimeout, and the sandbox is deleted.
func TestUpSilentServer(t *testing.T) {
	p := fakeProvider(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c) // held open, never answered
		}
	}()
	defer func() {
		ln.Close()
		<-accepted
		for _, c := range held {
			c.Close()
		}
	}()
	start := time.Now()
	_, err = hudup.Up(t.Context(), hudup.Options{Provider: p, Image: "any", Port: ln.Addr().(*net.TCPAddr).Port,
		Command: "sleep 60", ReadyTimeout: 2 * time.Second})
	if sandbox.ClassOf(err) != sandbox.DeadlineExceeded || !strings.Contains(err.Error(), "did not answer hello within 2s") {
		t.Fatalf("Up against a silent peer: %v", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("Up took %v against a 2 s ready timeout", d)
	}
	if l := live(t, p); len(l) != 0 {
		t.Fatalf("a timed-out Up left %+v", l)
	}
}

// Bad options are refused before any sandbox is created.
func TestUpOptions(t *testing.T) {
	p := fakeProvider(t)
	for _, o := range []hudup.Options{
		{Image: "x"},
		{Provider: p},
		{Provider: p, Image: "x", Port: 70000},
	} {
		if _, err := hudup.Up(t.Context(), o); sandbox.ClassOf(err) != sandbox.InvalidArgument {
			t.Errorf("Up(%+v) = %v, want InvalidArgument", o, err)
		}
	}
	if l := live(t, p); len(l) != 0 {
		t.Fatalf("%+v", l)
	}
	if got := hudup.DefaultCommand(9000); got != "hud serve env.py --host 0.0.0.0 --port 9000" {
		t.Fatalf("DefaultCommand = %q", got)
	}
}
