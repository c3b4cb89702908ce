package envd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/syncbuf"

	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

func run(t *testing.T, c *Client, cmd driver.Command) (code int, stdout, stderr string, err error) {
	t.Helper()
	var out, errb syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	p, err := c.Exec(ctxT(t), cmd)
	if err != nil {
		return -1, "", "", err
	}
	code, err = p.Wait(ctxT(t))
	return code, out.String(), errb.String(), err
}

func TestExecTable(t *testing.T) {
	dir := t.TempDir()
	noExec, badExec := dir+"/plain", dir+"/garbage"
	if err := os.WriteFile(noExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(badExec, []byte("\x00\x01not a program"), 0o755); err != nil {
		t.Fatal(err)
	}
	transports(t, func(t *testing.T, newEnv func(ServerOptions, ...ClientOption) *env) {
		e := newEnv(ServerOptions{})
		cases := []struct {
			name       string
			cmd        driver.Command
			code       int
			stdout     string
			stderr     string
			stderrPart string
		}{
			{name: "true", cmd: driver.Command{Args: []string{"true"}}},
			{name: "exit code", cmd: driver.Command{Args: []string{"sh", "-c", "exit 42"}}, code: 42},
			{name: "stdout and stderr apart", cmd: driver.Command{Args: []string{"sh", "-c", "echo out; echo err >&2"}}, stdout: "out\n", stderr: "err\n"},
			{name: "env", cmd: driver.Command{Args: []string{"sh", "-c", `printf %s "$GREETING"`}, Env: map[string]string{"GREETING": "hi there"}}, stdout: "hi there"},
			{name: "cwd", cmd: driver.Command{Args: []string{"pwd"}, Dir: dir}, stdout: dir + "\n"},
			{name: "stdin", cmd: driver.Command{Args: []string{"tr", "a-z", "A-Z"}, Stdin: strings.NewReader("hello stdin")}, stdout: "HELLO STDIN"},
			{name: "stdin absent is empty", cmd: driver.Command{Args: []string{"cat"}}},
			{name: "missing program", cmd: driver.Command{Args: []string{"no-such-program-berth"}}, code: 127, stderrPart: "no-such-program-berth"},
			{name: "not executable", cmd: driver.Command{Args: []string{noExec}}, code: 126, stderrPart: "not executable"},
			{name: "exec format error", cmd: driver.Command{Args: []string{badExec}}, code: 126, stderrPart: "exec format error"},
			{name: "killed by signal", cmd: driver.Command{Args: []string{"sh", "-c", "kill -9 $$"}}, code: 137},
			{name: "as user", cmd: driver.Command{Args: []string{"id", "-un"}, User: "nobody"}, stdout: "nobody\n"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				if tc.cmd.User != "" && os.Geteuid() != 0 {
					t.Skip("switching users needs root")
				}
				code, stdout, stderr, err := run(t, e.client, tc.cmd)
				if err != nil {
					t.Fatalf("exec: %v", err)
				}
				if code != tc.code {
					t.Errorf("exit code %d, want %d (stderr %q)", code, tc.code, stderr)
				}
				if stdout != tc.stdout {
					t.Errorf("stdout %q, want %q", stdout, tc.stdout)
				}
				if tc.stderrPart != "" {
					if !strings.Contains(stderr, tc.stderrPart) {
						t.Errorf("stderr %q does not mention %q", stderr, tc.stderrPart)
					}
				} else if stderr != tc.stderr {
					t.Errorf("stderr %q, want %q", stderr, tc.stderr)
				}
			})
		}
	})
}

func TestExecCwdMissingIsAnError(t *testing.T) {
	e := unixEnv(t, ServerOptions{})
	_, err := e.client.Exec(ctxT(t), driver.Command{Args: []string{"true"}, Dir: "/no/such/dir"})
	if !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("exec in a missing dir: %v, want InvalidArgument", err)
	}
}

func TestExecLargeOutput(t *testing.T) {
	transports(t, func(t *testing.T, newEnv func(ServerOptions, ...ClientOption) *env) {
		e := newEnv(ServerOptions{})
		const size = 10 << 20
		h := sha256.New()
		var n countWriter
		p, err := e.client.Exec(ctxT(t), driver.Command{
			Args:   []string{"head", "-c", fmt.Sprint(size), "/dev/urandom"},
			Stdout: io.MultiWriter(h, &n),
		})
		if err != nil {
			t.Fatal(err)
		}
		// The same bytes come back through stdin and out again: cat must echo them exactly.
		code, err := p.Wait(ctxT(t))
		if err != nil || code != 0 {
			t.Fatalf("wait: %d %v", code, err)
		}
		if n.n != size {
			t.Fatalf("got %d bytes, want %d", n.n, size)
		}
		// Round trip a known 10 MB payload through stdin and stdout.
		payload := bytes.Repeat([]byte("0123456789abcdef"), size/16)
		want := sha256.Sum256(payload)
		h2 := sha256.New()
		p, err = e.client.Exec(ctxT(t), driver.Command{Args: []string{"cat"}, Stdin: bytes.NewReader(payload), Stdout: h2})
		if err != nil {
			t.Fatal(err)
		}
		if code, err := p.Wait(ctxT(t)); err != nil || code != 0 {
			t.Fatalf("cat: %d %v", code, err)
		}
		if !bytes.Equal(h2.Sum(nil), want[:]) {
			t.Fatal("10 MB through stdin and stdout came back changed")
		}
	})
}

type countWriter struct{ n int }

func (c *countWriter) Write(p []byte) (int, error) { c.n += len(p); return len(p), nil }

// firstWrite signals once the first bytes arrive.
type firstWrite struct {
	once sync.Once
	got  chan string
}

func (f *firstWrite) Write(p []byte) (int, error) {
	f.once.Do(func() { f.got <- string(p) })
	return len(p), nil
}

func TestExecStreamsBeforeExitAndSignal(t *testing.T) {
	transports(t, func(t *testing.T, newEnv func(ServerOptions, ...ClientOption) *env) {
		e := newEnv(ServerOptions{})
		fw := &firstWrite{got: make(chan string, 1)}
		// The process never exits by itself: output seen here was streamed.
		p, err := e.client.Exec(ctxT(t), driver.Command{Args: []string{"sh", "-c", "echo ready; exec sleep 60"}, Stdout: fw})
		if err != nil {
			t.Fatal(err)
		}
		if p.PID() <= 0 {
			t.Fatalf("pid %d", p.PID())
		}
		select {
		case s := <-fw.got:
			if s != "ready\n" {
				t.Fatalf("first output %q", s)
			}
		case <-ctxT(t).Done():
			t.Fatal("no output while the process runs")
		}
		procs, err := e.client.Processes(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, pi := range procs {
			if int(pi.PID) == p.PID() && pi.Config != nil && pi.Config.Cmd == "sh" {
				found = true
			}
		}
		if !found {
			t.Fatalf("process %d not listed in %+v", p.PID(), procs)
		}
		if err := p.Signal(ctxT(t), driver.SIGTERM); err != nil {
			t.Fatal(err)
		}
		code, err := p.Wait(ctxT(t))
		if err != nil || code != 128+15 {
			t.Fatalf("after SIGTERM: code %d err %v, want 143", code, err)
		}
		if err := p.Signal(ctxT(t), driver.SIGKILL); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("signal after exit: %v, want NotFound", err)
		}
		if err := e.client.Signal(ctxT(t), p.PID(), driver.SIGKILL); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("signal by pid after exit: %v, want NotFound", err)
		}
	})
}

func TestExecTimeout(t *testing.T) {
	transports(t, func(t *testing.T, newEnv func(ServerOptions, ...ClientOption) *env) {
		e := newEnv(ServerOptions{})
		p, err := e.client.Exec(ctxT(t), driver.Command{Args: []string{"sleep", "60"}, Timeout: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Wait(ctxT(t))
		if !errors.Is(err, errdefs.ErrDeadlineExceeded) {
			t.Fatalf("wait: %v, want DeadlineExceeded", err)
		}
		waitGone(t, e.client, p.PID())
	})
}

// waitGone waits until the server no longer lists pid.
func waitGone(t *testing.T, c *Client, pid int) {
	t.Helper()
	ctx := ctxT(t)
	for {
		procs, err := c.Processes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		alive := false
		for _, pi := range procs {
			alive = alive || int(pi.PID) == pid
		}
		if !alive {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("process %d still running", pid)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func TestWaitContextLeavesProcessRunning(t *testing.T) {
	e := unixEnv(t, ServerOptions{})
	p, err := e.client.Exec(ctxT(t), driver.Command{Args: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait: %v", err)
	}
	if err := p.Signal(ctxT(t), driver.SIGKILL); err != nil {
		t.Fatalf("process should still run after Wait gave up: %v", err)
	}
	if code, err := p.Wait(ctxT(t)); err != nil || code != 137 {
		t.Fatalf("after kill: %d %v", code, err)
	}
}

func TestAttachSeesLiveOutput(t *testing.T) {
	e := unixEnv(t, ServerOptions{})
	pr, pw := io.Pipe()
	defer pw.Close()
	var first, second syncbuf.Buffer
	p, err := e.client.Exec(ctxT(t), driver.Command{Args: []string{"cat"}, Stdin: pr, Stdout: &first})
	if err != nil {
		t.Fatal(err)
	}
	q, err := e.client.Attach(ctxT(t), p.PID(), &second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pw.Write([]byte("shared line\n")); err != nil {
		t.Fatal(err)
	}
	_ = pw.Close()
	if code, err := p.Wait(ctxT(t)); err != nil || code != 0 {
		t.Fatalf("wait: %d %v", code, err)
	}
	if code, err := q.Wait(ctxT(t)); err != nil || code != 0 {
		t.Fatalf("attached wait: %d %v", code, err)
	}
	if first.String() != "shared line\n" || second.String() != "shared line\n" {
		t.Fatalf("starter saw %q, attached saw %q", first.String(), second.String())
	}
	if _, err := e.client.Attach(ctxT(t), p.PID(), nil, nil); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("attach to an ended process: %v, want NotFound", err)
	}
}

func TestConnectionLossIsUnavailable(t *testing.T) {
	e := tcpEnv(t, ServerOptions{})
	p, err := e.client.Exec(ctxT(t), driver.Command{Args: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	e.ts.CloseClientConnections()
	if _, err := p.Wait(ctxT(t)); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("wait after the connection dropped: %v, want Unavailable", err)
	}
	// The process outlives the stream, as in envd.
	if err := e.client.Signal(ctxT(t), p.PID(), driver.SIGKILL); err != nil {
		t.Fatalf("kill after reconnect: %v", err)
	}
}

func TestServerDownIsUnavailable(t *testing.T) {
	c, err := NewClient(UnixBaseURL, UnixHTTPClient(t.TempDir()+"/none.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Exec(ctxT(t), driver.Command{Args: []string{"true"}}); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("exec: %v, want Unavailable", err)
	}
	if _, err := c.Stat(ctxT(t), "/"); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("stat: %v, want Unavailable", err)
	}
	if _, err := c.ReadFile(ctxT(t), "/etc/hostname"); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("read file: %v, want Unavailable", err)
	}
}

func TestServerCloseKillsProcesses(t *testing.T) {
	e := unixEnv(t, ServerOptions{})
	p, err := e.client.Exec(ctxT(t), driver.Command{Args: []string{"sh", "-c", "sleep 60 & wait"}})
	if err != nil {
		t.Fatal(err)
	}
	_ = e.srv.Close()
	code, err := p.Wait(ctxT(t))
	if err != nil || code != 137 {
		t.Fatalf("after server close: %d %v, want 137", code, err)
	}
	if _, err := e.client.Exec(ctxT(t), driver.Command{Args: []string{"true"}}); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("exec on a closed server: %v, want Unavailable", err)
	}
	// The whole group died, the background sleep included (it may linger
	// a moment as a zombie until its new parent reaps it).
	ctx := ctxT(t)
	for {
		out, _ := exec.Command("pgrep", "-g", fmt.Sprint(p.PID())).Output()
		if len(out) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("processes left in group %d: %s", p.PID(), out)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
