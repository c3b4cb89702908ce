package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/harbortest"
	"github.com/berth-sh/berth/internal/testbin"
	"github.com/berth-sh/berth/openenv"
	"github.com/berth-sh/berth/openenv/tbench2"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/sandbox"
)

// hostedServer is `berth openenv serve` over the local provider, run as its
// own process (the real binary, so that it can be killed outright), on a
// tasks directory with one task.
type hostedServer struct {
	t     *testing.T
	cmd   *exec.Cmd
	url   string
	state string
	prov  *sandbox.Provider // the same state dir, seen from the test
}

func startHosted(t *testing.T, args ...string) *hostedServer {
	t.Helper()
	testbin.NeedLocal(t)
	bin, err := testbin.Berth()
	if err != nil {
		t.Fatal(err)
	}
	agent, err := testbin.Agent()
	if err != nil {
		t.Fatal(err)
	}
	state, err := os.MkdirTemp("", "berth-oe-")
	if err != nil {
		t.Fatal(err)
	}
	tasks := t.TempDir()
	harbortest.Task(t, tasks, "answer", harbortest.TOMLImage(local.DefaultImage, "60", "60"), harbortest.SolveWrite, harbortest.TestAnswer, nil)
	cmd := exec.Command(bin, append([]string{"openenv", "serve", "--backend", "local", "--tasks", tasks, "--addr", "127.0.0.1:0", "--pool", "0"}, args...)...)
	cmd.Env = append(os.Environ(), local.EnvStateDir+"="+state, local.EnvAgentBinary+"="+agent)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d, err := local.New(local.Options{StateDir: state, AgentBinary: agent})
	if err != nil {
		t.Fatal(err)
	}
	h := &hostedServer{t: t, cmd: cmd, state: state, prov: sandbox.NewProvider("local", d)}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
		}
		// Whatever the test left is removed, never walked into.
		infos, _ := h.prov.List(context.Background(), nil)
		for _, in := range infos {
			h.prov.Delete(context.Background(), in.ID)
		}
		h.prov.Reap(context.Background())
		h.prov.Close()
		os.RemoveAll(state)
	})
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "export OPENENV_ENV_URL="); ok {
			h.url = u
			break
		}
	}
	if h.url == "" {
		t.Fatalf("berth openenv serve printed no URL: %v", sc.Err())
	}
	go func() {
		for sc.Scan() {
		}
	}()
	return h
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

func waitUntil(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
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
	waitUntil(t, 30*time.Second, "the sandbox deleted after the client left", func() bool { return len(h.live()) == 0 })
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
	h.cmd.Wait()
	infos := h.live()
	if len(infos) != 1 || infos[0].ExpiresAt.IsZero() || time.Until(infos[0].ExpiresAt) > 5*time.Second {
		t.Fatalf("after kill -9: %+v", infos)
	}
	id := infos[0].ID
	waitUntil(t, 30*time.Second, "the sandbox's TTL to end it", func() bool {
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
