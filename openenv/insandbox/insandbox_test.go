package insandbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/harbor/task"
	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/internal/testing/harbortest"
	"github.com/berth-sh/berth/internal/testing/localtest"
	"github.com/berth-sh/berth/internal/testing/testbin"
	"github.com/berth-sh/berth/internal/testing/waitfor"
	"github.com/berth-sh/berth/openenv"
	"github.com/berth-sh/berth/openenv/insandbox"
	"github.com/berth-sh/berth/openenv/tbench2"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/sandbox"
)

func TestMain(m *testing.M) { testbin.Main(m) }

// launched is the tbench2 server in a local sandbox, for one task that
// wants 42 in /tmp/answer.
type launched struct {
	*insandbox.Env
	prov *sandbox.Provider
}

func launch(t *testing.T) *launched {
	t.Helper()
	d := localtest.Open(t)
	agent, err := testbin.Agent() // built already: Open's init, uploaded as the server too
	if err != nil {
		t.Fatal(err)
	}
	prov := sandbox.NewProvider("local", d)
	tasks := t.TempDir()
	dir := harbortest.Task(t, tasks, "answer", harbortest.TOMLImage(local.DefaultImage, "60", "60"), harbortest.SolveWrite, harbortest.TestAnswer, nil)
	e, err := insandbox.Launch(t.Context(), insandbox.LaunchOptions{
		Provider: prov, Task: task.Load(dir), AgentBinary: agent, CommandTimeout: time.Minute, Labels: map[string]string{trial.LabelJob: "t"},
	})
	if err != nil {
		t.Fatal(err)
	}
	l := &launched{Env: e, prov: prov}
	t.Cleanup(func() {
		e.Close(context.Background())
		if n := l.live(t); n != 0 {
			t.Errorf("%d sandboxes left after the test", n)
		}
		d.Reap(context.Background())
		prov.Close()
	})
	return l
}

func (l *launched) live(t *testing.T) int {
	t.Helper()
	infos, err := l.prov.List(context.Background(), map[string]string{trial.LabelLauncher: tbench2.Launcher})
	if err != nil {
		t.Fatal(err)
	}
	return len(infos)
}

func (l *launched) client(t *testing.T, o openenv.ClientOptions) *openenv.Client {
	t.Helper()
	c, err := l.Client(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// processes is the sandbox's process list (busybox ps).
func (l *launched) processes(t *testing.T) string {
	t.Helper()
	r, err := l.Sandbox.Run(t.Context(), sandbox.Command{Args: []string{"ps", "-o", "pid,args"}})
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("ps: %v %s", err, r.Stderr)
	}
	return string(r.Stdout)
}

// The episode runs in the sandbox that Launch made: the reset's sandbox is
// the machine the server runs on, commands run there, evaluate scores.
// The server answers only the launcher's key; the key stays out of the
// commands' environment; the tests stay out of the agent's reach until
// evaluate only as far as file modes go (see the package doc).
func TestLaunchEpisode(t *testing.T) {
	l := launch(t)
	c := l.client(t, openenv.ClientOptions{})
	r, err := c.Reset(t.Context(), map[string]any{"task_id": "answer"})
	if err != nil {
		t.Fatal(err)
	}
	var obs tbench2.Observation
	if err := r.Decode(&obs); err != nil || !strings.HasPrefix(fmt.Sprint(obs.Info["sandbox_id"]), "here-") {
		t.Fatalf("reset: %+v %v", obs, err)
	}
	r, err = c.Step(t.Context(), tbench2.Exec("env; echo 42 > /tmp/answer"))
	if err == nil {
		err = r.Decode(&obs)
	}
	if err != nil || !obs.Success || strings.Contains(obs.Output, insandbox.KeyVar) {
		t.Fatalf("exec: %+v %v", obs, err)
	}
	// The command ran in the launcher's sandbox, not anywhere else.
	if b, err := l.Sandbox.ReadFile(t.Context(), "/tmp/answer"); err != nil || strings.TrimSpace(string(b)) != "42" {
		t.Fatalf("the sandbox's /tmp/answer: %q %v", b, err)
	}
	r, err = c.Step(t.Context(), tbench2.Action{ActionType: tbench2.ActionEvaluate, Block: true})
	if err != nil || r.Reward == nil || *r.Reward != 1 {
		t.Fatalf("evaluate: %+v %v", r, err)
	}
	// Without the key, nothing but /health.
	stranger, err := openenv.NewClient(l.Endpoint().URL, openenv.ClientOptions{Header: l.Env.Env.Header()})
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	if _, err := stranger.Reset(t.Context(), map[string]any{"task_id": "answer"}); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("a client without the key: %v", err)
	}
}

// A client that disconnects in the middle of a command ends the episode's
// processes in the sandbox, and the launcher's Close leaves no sandbox.
func TestLaunchDisconnectMidEpisode(t *testing.T) {
	l := launch(t)
	c := l.client(t, openenv.ClientOptions{})
	if _, err := c.Reset(t.Context(), map[string]any{"task_id": "answer"}); err != nil {
		t.Fatal(err)
	}
	// A background session, seen running, then a blocking command that the
	// client gives up on.
	if _, err := c.Step(t.Context(), tbench2.Action{ActionType: tbench2.ActionExec, Command: "sleep 301"}); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, 10*time.Second, "the background command running", func() bool { return strings.Contains(l.processes(t), "sleep 301") })
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	if _, err := c.Step(ctx, tbench2.Exec("sleep 302")); err == nil {
		t.Fatal("a 300 s command returned within half a second")
	}
	waitfor.Until(t, 30*time.Second, "the episode's commands ended after the client left", func() bool {
		ps := l.processes(t)
		return !strings.Contains(ps, "sleep 301") && !strings.Contains(ps, "sleep 302")
	})
	if err := l.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := l.live(t); n != 0 {
		t.Fatalf("%d sandboxes after Close", n)
	}
}

// A launcher whose context ends mid-episode still deletes the sandbox.
func TestLaunchCancelledLauncher(t *testing.T) {
	l := launch(t)
	ctx, cancel := context.WithCancel(t.Context())
	c := l.client(t, openenv.ClientOptions{})
	if _, err := c.Reset(ctx, map[string]any{"task_id": "answer"}); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := l.live(t); n != 0 {
		t.Fatalf("%d sandboxes after Close under an ended context", n)
	}
}

// The server killed with -9 in the sandbox: the client's next call fails
// at once instead of waiting out its message timeout.
func TestLaunchServerKilled(t *testing.T) {
	l := launch(t)
	c := l.client(t, openenv.ClientOptions{MessageTimeout: 5 * time.Minute})
	if _, err := c.Reset(t.Context(), map[string]any{"task_id": "answer"}); err != nil {
		t.Fatal(err)
	}
	r, err := l.Sandbox.Run(t.Context(), sandbox.Command{Args: []string{"sh", "-c", "kill -9 $(cat /tmp/berth-up.pid)"}})
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("kill: %v %s", err, r.Stderr)
	}
	start := time.Now()
	_, err = c.Step(t.Context(), tbench2.Exec("echo hi"))
	if err == nil {
		t.Fatal("a step after the server died succeeded")
	}
	if d := time.Since(start); d > time.Minute {
		t.Fatalf("the step failed only after %v: %v", d, err)
	}
}

// The server holds one session (Miles' MAX_CONCURRENT_ENVS=1): the next
// client gets CAPACITY_REACHED, and one that waits gets in once the slot
// frees and scores its own episode.
func TestLaunchCapacity(t *testing.T) {
	l := launch(t)
	holder := l.client(t, openenv.ClientOptions{})
	if _, err := holder.Reset(t.Context(), map[string]any{"task_id": "answer"}); err != nil {
		t.Fatal(err)
	}
	_, err := l.client(t, openenv.ClientOptions{}).Reset(t.Context(), map[string]any{"task_id": "answer"})
	var se *openenv.ServerError
	if !errors.As(err, &se) || se.Code != openenv.CapacityReached || string(se.Data["max_sessions"]) != "1" {
		t.Fatalf("second session: %v", err)
	}
	waiter := l.client(t, openenv.ClientOptions{CapacityWait: time.Minute, CapacityBackoff: [2]time.Duration{50 * time.Millisecond, 200 * time.Millisecond}})
	done := make(chan error, 1)
	go func() {
		_, err := waiter.Reset(t.Context(), map[string]any{"task_id": "answer"})
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
	if _, err := waiter.Step(t.Context(), tbench2.Exec("echo 42 > /tmp/answer")); err != nil {
		t.Fatal(err)
	}
	r, err := waiter.Step(t.Context(), tbench2.Action{ActionType: tbench2.ActionEvaluate, Block: true})
	if err != nil || r.Reward == nil || *r.Reward != 1 {
		t.Fatalf("evaluate after the wait: %+v %v", r, err)
	}
}
