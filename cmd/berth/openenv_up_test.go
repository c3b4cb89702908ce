package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/internal/syncbuf"
	"github.com/berth-sh/berth/internal/testing/testbin"
	"github.com/berth-sh/berth/internal/testing/testimage"
	"github.com/berth-sh/berth/internal/testing/waitfor"
	"github.com/berth-sh/berth/sandbox"
)

// upRun is `berth openenv up` over the local provider, run as its own
// process, with an image that carries a small env server of the test's
// (openenv/up/internal/envserver) at /envserver.
type upRun struct {
	*onLocal
	t      *testing.T
	url    string
	stderr *syncbuf.Buffer
}

func startUp(t *testing.T, wantURL bool, args ...string) *upRun {
	t.Helper()
	testbin.NeedLocal(t)
	server, err := testbin.Static("envserver", "github.com/berth-sh/berth/openenv/up/internal/envserver")
	if err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile(server)
	if err != nil {
		t.Fatal(err)
	}
	base, err := testimage.Busybox(t).Layers()
	if err != nil {
		t.Fatal(err)
	}
	img := testimage.Image(t, v1.Config{Cmd: []string{"sh"}}, append(base, testimage.Layer(t, testimage.Entry{Name: "envserver", Body: string(body), Mode: 0o755}))...)
	host := testimage.Serve(t, map[string]v1.Image{"envserver:1": img})

	u := &upRun{t: t, stderr: &syncbuf.Buffer{}}
	u.onLocal = startOnLocal(t, append([]string{"openenv", "up", "--backend", "local", "--image", host + "/envserver:1"}, args...), u.stderr)
	u.url = u.scanURL()
	if wantURL && u.url == "" {
		<-u.done
		t.Fatalf("berth openenv up printed no URL; its stderr:\n%s", u.stderr.String())
	}
	return u
}

func (u *upRun) live() []sandbox.Info {
	u.t.Helper()
	infos, err := u.prov.List(context.Background(), map[string]string{trial.LabelLauncher: upLauncher})
	if err != nil {
		u.t.Fatal(err)
	}
	return infos
}

// wait is the process's end, bounded.
func (u *upRun) wait(limit time.Duration) error {
	u.t.Helper()
	select {
	case <-u.done:
		return u.err
	case <-time.After(limit):
		u.t.Fatalf("berth openenv up still running after %v; stderr:\n%s", limit, u.stderr.String())
		return nil
	}
}

// `berth openenv up` starts the image's server, prints a URL that reaches
// it (health, then a reset that shows the server's environment), and Ctrl-C
// deletes the sandbox.
func TestOpenEnvUp(t *testing.T) {
	u := startUp(t, true, "--cmd", "/envserver --addr 0.0.0.0:8000 --delay 300ms", "--port", "8000", "--env", "ENV_MARK=up-42")
	res, err := http.Get(u.url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("health: %s", res.Status)
	}
	res, err = http.Post(u.url+"/reset", "application/json", strings.NewReader(`{"seed":7}`))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Observation struct {
			Echo map[string]any `json:"echo"`
			Mark string         `json:"mark"`
		} `json:"observation"`
		Reward *float64 `json:"reward"`
		Done   bool     `json:"done"`
	}
	err = json.NewDecoder(res.Body).Decode(&got)
	res.Body.Close()
	if err != nil || got.Observation.Mark != "up-42" || got.Observation.Echo["seed"] != float64(7) || got.Reward != nil || got.Done {
		t.Fatalf("reset through the URL: %+v %v", got, err)
	}
	if n := len(u.live()); n != 1 {
		t.Fatalf("%d sandboxes while up runs", n)
	}
	if err := u.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := u.wait(time.Minute); err != nil {
		t.Fatalf("after Ctrl-C: %v; stderr:\n%s", err, u.stderr.String())
	}
	if n := len(u.live()); n != 0 {
		t.Fatalf("%d sandboxes after Ctrl-C", n)
	}
	if _, err := http.Get(u.url + "/health"); err == nil {
		t.Fatal("the URL still answers after Ctrl-C")
	}
}

// A server that exits before it is healthy fails the command with its own
// output, and leaves no sandbox.
func TestOpenEnvUpServerExits(t *testing.T) {
	u := startUp(t, false, "--cmd", "/envserver --delay 1h --exit-after 200ms")
	err := u.wait(time.Minute)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 || !strings.Contains(u.stderr.String(), "giving up on purpose") {
		t.Fatalf("up with a dying server: %v; stderr:\n%s", err, u.stderr.String())
	}
	if n := len(u.live()); n != 0 {
		t.Fatalf("%d sandboxes after the failed start", n)
	}
}

// berth killed with -9 leaves its sandbox, which the TTL ends and reap
// removes.
func TestOpenEnvUpKilledTTL(t *testing.T) {
	u := startUp(t, true, "--cmd", "/envserver", "--ttl", "4s")
	if err := u.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	u.wait(time.Minute)
	infos := u.live()
	if len(infos) != 1 || infos[0].ExpiresAt.IsZero() || time.Until(infos[0].ExpiresAt) > 5*time.Second {
		t.Fatalf("after kill -9: %+v", infos)
	}
	id := infos[0].ID
	waitfor.Until(t, 30*time.Second, "the sandbox's TTL to end it", func() bool {
		ids, err := u.prov.Reap(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return len(ids) == 1 && ids[0] == id
	})
	if _, err := u.prov.Connect(t.Context(), id); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("connect after reap: %v", err)
	}
}
