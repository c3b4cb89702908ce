package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/testing/harbortest"
	"github.com/berth-sh/berth/internal/testing/waitfor"
	"github.com/berth-sh/berth/openenv"
	"github.com/berth-sh/berth/openenv/tbench2"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/sandbox"
)

// hostedServer is `berth openenv serve` over the local provider, run as its
// own process (the real binary, so that it can be killed outright), on a
// tasks directory with one task.
type hostedServer struct {
	*onLocal
	t   *testing.T
	url string
}

func startHosted(t *testing.T, args ...string) *hostedServer {
	t.Helper()
	tasks := t.TempDir()
	harbortest.Task(t, tasks, "answer", harbortest.TOMLImage(local.DefaultImage, "60", "60"), harbortest.SolveWrite, harbortest.TestAnswer, nil)
	b := startOnLocal(t, append([]string{"openenv", "serve", "--backend", "local", "--tasks", tasks, "--addr", "127.0.0.1:0", "--pool", "0"}, args...), os.Stderr)
	h := &hostedServer{t: t, onLocal: b}
	if h.url = b.scanURL(); h.url == "" {
		t.Fatal("berth openenv serve printed no URL")
	}
	return h
}

// onLocal is the berth binary run as its own process over the local
// provider, with a state dir that the test sees too (prov).
type onLocal struct {
	cmd   *exec.Cmd
	out   *bufio.Scanner
	state string
	prov  *sandbox.Provider
	done  chan struct{} // closed when the process ended and its output was read
	err   error         // the process's exit, once done is closed
}

// startOnLocal starts berth with args; whatever the test leaves (the
// process, sandboxes, the state dir) is removed when it ends.
func startOnLocal(t *testing.T, args []string, stderr io.Writer) *onLocal {
	t.Helper()
	bin, agent := localBinaries(t)
	state, err := os.MkdirTemp("", "berth-oe-")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), local.EnvStateDir+"="+state, local.EnvAgentBinary+"="+agent)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d, err := local.New(local.Options{StateDir: state, AgentBinary: agent})
	if err != nil {
		t.Fatal(err)
	}
	b := &onLocal{cmd: cmd, out: bufio.NewScanner(out), state: state, prov: sandbox.NewProvider("local", d), done: make(chan struct{})}
	t.Cleanup(func() {
		select {
		case <-b.done:
		default:
			cmd.Process.Signal(syscall.SIGTERM)
			<-b.done
		}
		// Whatever the test left is removed, never walked into.
		infos, _ := b.prov.List(context.Background(), nil)
		for _, in := range infos {
			b.prov.Delete(context.Background(), in.ID)
		}
		b.prov.Reap(context.Background())
		b.prov.Close()
		os.RemoveAll(state)
	})
	return b
}

// scanURL reads stdout up to the printed OPENENV_ENV_URL ("" when the
// process ended first), then drains the rest and waits for the process.
func (b *onLocal) scanURL() string {
	var url string
	for url == "" && b.out.Scan() {
		if v, ok := strings.CutPrefix(b.out.Text(), "export OPENENV_ENV_URL="); ok {
			url = v
		}
	}
	go func() {
		for b.out.Scan() {
		}
		b.err = b.cmd.Wait()
		close(b.done)
	}()
	return url
}

// live lists the server's sandboxes.
func (h *hostedServer) live() []sandbox.Info {
	h.t.Helper()
	infos, err := h.prov.List(context.Background(), map[string]string{"berth.launcher": tbench2.Launcher})
	if err != nil {
		h.t.Fatal(err)
	}
	return infos
}

func (h *hostedServer) client(opts openenv.ClientOptions) *openenv.Client {
	h.t.Helper()
	c, err := openenv.NewClient(h.url, opts)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { c.Close() })
	return c
}

// A client that disconnects in the middle of a command leaves no sandbox.
func TestOpenEnvDisconnectLeavesNoSandbox(t *testing.T) {
	h := startHosted(t)
	c := h.client(openenv.ClientOptions{})
	if _, err := c.Reset(t.Context(), map[string]any{"task_id": "answer"}); err != nil {
		t.Fatal(err)
	}
	if n := len(h.live()); n != 1 {
		t.Fatalf("%d sandboxes after reset", n)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	if _, err := c.Step(ctx, tbench2.Exec("sleep 300")); err == nil {
		t.Fatal("a 300 s command returned within half a second")
	}
	// The step's context ended: the client dropped the connection mid-command.
	waitfor.Until(t, 30*time.Second, "the sandbox deleted after the client left", func() bool { return len(h.live()) == 0 })
}

// The server killed with -9 leaves its sandbox, which the provider-side TTL
// ends and reap removes.
func TestOpenEnvKilledServerTTL(t *testing.T) {
	h := startHosted(t, "--ttl", "4s")
	c := h.client(openenv.ClientOptions{})
	if _, err := c.Reset(t.Context(), map[string]any{"task_id": "answer"}); err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-h.done
	infos := h.live()
	if len(infos) != 1 || infos[0].ExpiresAt.IsZero() || time.Until(infos[0].ExpiresAt) > 5*time.Second {
		t.Fatalf("after kill -9: %+v", infos)
	}
	id := infos[0].ID
	waitfor.Until(t, 30*time.Second, "the sandbox's TTL to end it", func() bool {
		ids, err := h.prov.Reap(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return len(ids) == 1 && ids[0] == id
	})
	if n := len(h.live()); n != 0 {
		t.Fatalf("%d sandboxes after the TTL and reap", n)
	}
	if _, err := h.prov.Connect(t.Context(), id); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("connect after reap: %v", err)
	}
}

// At the capacity limit the next client gets CAPACITY_REACHED, and one that
// waits succeeds once a slot frees.
func TestOpenEnvCapacity(t *testing.T) {
	h := startHosted(t, "--max-envs", "1")
	holder := h.client(openenv.ClientOptions{})
	if _, err := holder.Reset(t.Context(), map[string]any{"task_id": "answer"}); err != nil {
		t.Fatal(err)
	}
	_, err := h.client(openenv.ClientOptions{}).Reset(t.Context(), map[string]any{"task_id": "answer"})
	var se *openenv.ServerError
	if !errors.As(err, &se) || se.Code != openenv.CapacityReached || string(se.Data["active_sessions"]) != "1" || string(se.Data["max_sessions"]) != "1" {
		t.Fatalf("second session: %v", err)
	}
	waiter := h.client(openenv.ClientOptions{CapacityWait: time.Minute, CapacityBackoff: [2]time.Duration{50 * time.Millisecond, 200 * time.Millisecond}})
	done := make(chan error, 1)
	go func() {
		r, err := waiter.Reset(t.Context(), map[string]any{"task_id": "answer"})
		if err == nil {
			var o tbench2.Observation
			r.Decode(&o)
			if o.Info["sandbox_id"] == nil {
				err = fmt.Errorf("reset without a sandbox: %+v", o)
			}
		}
		done <- err
	}()
	time.Sleep(time.Second)
	select {
	case err := <-done:
		t.Fatalf("the waiting client got in while the slot was held: %v", err)
	default:
	}
	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	o, err := waiter.Step(t.Context(), tbench2.Exec("echo 42 > /tmp/answer"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := waiter.Step(t.Context(), tbench2.Action{ActionType: tbench2.ActionEvaluate, Block: true})
	if err != nil || r.Reward == nil || *r.Reward != 1 {
		t.Fatalf("evaluate after the wait: %+v %v (exec: %+v)", r, err, o)
	}
	if err := waiter.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(h.live()); n != 0 {
		t.Fatalf("%d sandboxes after both sessions closed", n)
	}
}
