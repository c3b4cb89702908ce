package shellsession

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/testing/fakeprovider"
	"github.com/berth-sh/berth/sandbox"
)

// openSandbox is a fake-provider sandbox whose commands are host
// processes: enough for a shell, and tmux where the host has it.
func openSandbox(t *testing.T) *sandbox.Sandbox {
	t.Helper()
	d, err := fakeprovider.New(fakeprovider.Options{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	p := sandbox.NewProvider("fake", d)
	sb, err := p.Create(t.Context(), sandbox.Spec{Image: "host"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sb.Delete(context.Background())
		sb.Close()
		p.Close()
	})
	return sb
}

func modes(t *testing.T, f func(t *testing.T, s Session)) {
	for _, mode := range []string{"pipe", "tmux"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "tmux" {
				if _, err := exec.LookPath("tmux"); err != nil {
					t.Skip("tmux not installed (apt-get install tmux)")
				}
			}
			sb := openSandbox(t)
			s, err := Open(t.Context(), sb, Options{Mode: mode, MaxOutput: 4096})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close(context.Background()) })
			if s.Kind() != mode {
				t.Fatalf("kind %s", s.Kind())
			}
			f(t, s)
		})
	}
}

func send(t *testing.T, s Session, keys string, wait time.Duration) (bool, string) {
	t.Helper()
	idle, err := s.Send(t.Context(), keys, wait)
	if err != nil {
		t.Fatalf("send %q: %v", keys, err)
	}
	out, err := s.Output(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return idle, out
}

func TestStateCarriesOver(t *testing.T) {
	modes(t, func(t *testing.T, s Session) {
		send(t, s, "mkdir -p sub && cd sub && export BERTH_X=42\n", 10*time.Second)
		idle, out := send(t, s, "pwd; echo x=$BERTH_X; echo oops >&2\n", 10*time.Second)
		if !idle || !strings.Contains(out, "/sub\n") || !strings.Contains(out, "x=42") || !strings.Contains(out, "oops") {
			t.Fatalf("idle %v, output:\n%s", idle, out)
		}
		if strings.Contains(out, "\x1e") || strings.Contains(out, "berth-tmux") || strings.Contains(out, "wait -S") {
			t.Fatalf("markers in the output:\n%q", out)
		}
	})
}

func TestIdleAsSoonAsDone(t *testing.T) {
	modes(t, func(t *testing.T, s Session) {
		start := time.Now()
		idle, out := send(t, s, "sleep 0.2; echo finished\n", 30*time.Second)
		if !idle || !strings.Contains(out, "finished") {
			t.Fatalf("idle %v, output:\n%s", idle, out)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("waited %v for a 0.2 s command", d)
		}
	})
}

func TestStillRunningThenInterrupted(t *testing.T) {
	modes(t, func(t *testing.T, s Session) {
		idle, _ := send(t, s, "sleep 30; echo slept\n", 300*time.Millisecond)
		if idle {
			t.Fatal("idle while sleep 30 runs")
		}
		idle, _ = send(t, s, "C-c", 10*time.Second)
		if !idle {
			t.Fatal("C-c did not bring the shell back")
		}
		idle, out := send(t, s, "echo back\n", 10*time.Second)
		if !idle || !strings.Contains(out, "back") || strings.Contains(out, "slept") {
			t.Fatalf("after C-c: idle %v, output:\n%s", idle, out)
		}
	})
}

func TestLargeOutputIsBounded(t *testing.T) {
	modes(t, func(t *testing.T, s Session) {
		_, out := send(t, s, "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); echo line$i; done\n", 60*time.Second)
		if len(out) > 4096+200 || !strings.Contains(out, "omitted") || !strings.Contains(out, "line20000") {
			t.Fatalf("%d bytes:\n%s", len(out), out)
		}
	})
}

func TestPipeShellRestartsAfterExit(t *testing.T) {
	sb := openSandbox(t)
	s, err := Open(t.Context(), sb, Options{Mode: "pipe"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	send(t, s, "exit 3\n", 5*time.Second)
	idle, out := send(t, s, "echo alive\n", 10*time.Second)
	if !idle || !strings.Contains(out, "exited with code 3") || !strings.Contains(out, "alive") {
		t.Fatalf("idle %v, output:\n%s", idle, out)
	}
	if _, err := s.Send(t.Context(), "C-z", time.Second); !errors.Is(err, ErrKey) {
		t.Fatalf("C-z without a terminal: %v", err)
	}
}

func TestSandboxGone(t *testing.T) {
	sb := openSandbox(t)
	s, err := Open(t.Context(), sb, Options{Mode: "pipe"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if err := sb.Delete(t.Context()); err != nil {
		t.Fatal(err)
	}
	var serr error
	for range 3 {
		if _, serr = s.Send(t.Context(), "echo hi\n", 5*time.Second); serr != nil {
			break
		}
		s.Output(t.Context())
	}
	if serr == nil {
		t.Fatal("a deleted sandbox's shell keeps answering")
	}
}

func TestClip(t *testing.T) {
	var b strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&b, "line %d é\n", i)
	}
	s := b.String()
	c := Clip(s, 1000)
	if len(c) > 1100 || !strings.HasPrefix(c, "line 0 é\n") || !strings.HasSuffix(c, "line 999 é\n") || !strings.Contains(c, "omitted") {
		t.Fatalf("clip:\n%s", c)
	}
	if Clip("short", 1000) != "short" {
		t.Fatal("short text changed")
	}
}
