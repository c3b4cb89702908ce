package tbench2_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/testing/harbortest"
	"github.com/berth-sh/berth/openenv"
	"github.com/berth-sh/berth/openenv/tbench2"
	"github.com/berth-sh/berth/sandbox"
)

// TestMain is testbin.Main (the local provider's binary is removed after).

// env is a tbench2 server over the fake provider (chrooted busybox
// sandboxes: root and busybox-static), with a tasks directory of its own.
type env struct {
	t     *testing.T
	prov  *sandbox.Provider
	tasks string
	url   string
	srv   *openenv.Server
}

// Tasks every test can reset to.
const (
	taskAnswer   = "answer"    // solve.sh writes 42, test.sh checks it
	taskNoReward = "no-reward" // test.sh writes no reward
)

func newEnv(t *testing.T, mod func(*tbench2.Options, *openenv.Options)) *env {
	t.Helper()
	reg := harbortest.Registry(t, nil) // skips without root or busybox
	prov, err := reg.Open(t.Context(), "fake", harbortest.Env(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	tasks := t.TempDir()
	toml := harbortest.TOML("60", "60")
	harbortest.Task(t, tasks, taskAnswer, toml, harbortest.SolveWrite, harbortest.TestAnswer, map[string]string{
		"instruction.md": "Write 42 to /tmp/answer.\n",
	})
	harbortest.Task(t, tasks, taskNoReward, toml, harbortest.SolveWrite, harbortest.TestNoReward, nil)
	o := tbench2.Options{Provider: prov, TasksDir: tasks, CommandTimeout: 30 * time.Second}
	so := openenv.Options{Info: tbench2.Info(), MaxConcurrentEnvs: 4}
	if mod != nil {
		mod(&o, &so)
	}
	so.Factory, err = tbench2.NewFactory(o)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := openenv.New(so)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	e := &env{t: t, prov: prov, tasks: tasks, url: hs.URL, srv: srv}
	t.Cleanup(func() {
		srv.Close()
		hs.Close()
		if n := e.live(); n != 0 {
			t.Errorf("%d sandboxes left after the test", n)
		}
		prov.Close()
	})
	return e
}

// live counts the sandboxes the environment made that still exist.
func (e *env) live() int {
	e.t.Helper()
	infos, err := e.prov.List(context.Background(), map[string]string{"berth.launcher": tbench2.Launcher})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(infos)
}

func (e *env) client() *openenv.Client {
	e.t.Helper()
	c, err := openenv.NewClient(e.url, openenv.ClientOptions{MessageTimeout: time.Minute})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	return c
}

// step sends a and decodes the observation.
func step(t *testing.T, c *openenv.Client, a tbench2.Action) (tbench2.Observation, *openenv.Result) {
	t.Helper()
	r, err := c.Step(t.Context(), a)
	if err != nil {
		t.Fatalf("%+v: %v", a, err)
	}
	var o tbench2.Observation
	if err := r.Decode(&o); err != nil {
		t.Fatal(err)
	}
	return o, r
}

func reset(t *testing.T, c *openenv.Client, taskID string) tbench2.Observation {
	t.Helper()
	r, err := c.Reset(t.Context(), map[string]any{"task_id": taskID})
	if err != nil {
		t.Fatal(err)
	}
	var o tbench2.Observation
	if err := r.Decode(&o); err != nil {
		t.Fatal(err)
	}
	return o
}

func str(s string) *string { return &s }

func num(v any) float64 {
	switch n := v.(type) {
	case float64:
		return n
	case json.Number:
		f, _ := n.Float64()
		return f
	}
	return -1
}

func abs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
