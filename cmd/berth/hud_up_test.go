package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth/hud"
	"github.com/berth-sh/berth/hud/hudup"
	"github.com/berth-sh/berth/internal/syncbuf"
	"github.com/berth-sh/berth/internal/testing/testbin"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/providers/local/image/seed"
	"github.com/berth-sh/berth/sandbox"
)

// hudEnvTasks is the test image's /app/env.py: the hudenv server lists its
// lines as tasks, so a client that sees them knows the server ran in the
// image's /app.
const hudEnvTasks = "count-files Count the files in /data\nfix-bug Fix the failing test\n"

// hudUpHost is a local provider state dir with the hudenv image imported,
// and the berth binary and environment to run against it.
type hudUpHost struct {
	bin  string
	env  []string
	prov *sandbox.Provider // the same state dir, seen from the test
}

func newHUDUpHost(t *testing.T) *hudUpHost {
	t.Helper()
	bin, agent := localBinaries(t)
	server, err := testbin.Static("hud", "github.com/berth-sh/berth/internal/testing/hudenv")
	if err != nil {
		t.Fatal(err)
	}
	state, err := os.MkdirTemp("", "berth-hudup-")
	if err != nil {
		t.Fatal(err)
	}
	d, err := local.New(local.Options{StateDir: state, AgentBinary: agent})
	if err != nil {
		t.Fatal(err)
	}
	h := &hudUpHost{bin: bin, env: append(os.Environ(), local.EnvStateDir+"="+state, local.EnvAgentBinary+"="+agent),
		prov: sandbox.NewProvider("local", d)}
	t.Cleanup(func() {
		h.prov.Close()
		removeState(state, agent)
	})
	tarPath := filepath.Join(t.TempDir(), "hudenv.tar")
	writeHUDEnvImage(t, tarPath, server)
	if out, err := h.berth("image", "import", "test.local/hudenv:1", tarPath).CombinedOutput(); err != nil {
		t.Fatalf("image import: %v\n%s", err, out)
	}
	return h
}

// writeHUDEnvImage writes a rootfs tar laid out as a HUD environment image:
// busybox, the hudenv server as /usr/local/bin/hud (where HUD's CLI is),
// and /app/env.py.
func writeHUDEnvImage(t *testing.T, path, server string) {
	t.Helper()
	var base bytes.Buffer
	if err := seed.BusyboxTar(&base, ""); err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile(server)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	tr := tar.NewReader(&base)
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		seen[h.Name] = true
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			t.Fatal(err)
		}
	}
	for _, dir := range []string{"usr/", "usr/local/", "usr/local/bin/", "app/"} {
		if !seen[dir] {
			if err := tw.WriteHeader(&tar.Header{Name: dir, Mode: 0o755, Typeflag: tar.TypeDir}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, e := range []struct {
		name string
		mode int64
		body []byte
	}{
		{"usr/local/bin/hud", 0o755, body},
		{"app/env.py", 0o644, []byte(hudEnvTasks)},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: e.mode, Size: int64(len(e.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

func (h *hudUpHost) berth(args ...string) *exec.Cmd {
	cmd := exec.Command(h.bin, args...)
	cmd.Env = h.env
	return cmd
}

func (h *hudUpHost) live(t *testing.T) []sandbox.Info {
	t.Helper()
	infos, err := h.prov.List(context.Background(), map[string]string{"berth.launcher": hudup.LabelLauncher})
	if err != nil {
		t.Fatal(err)
	}
	return infos
}

// `berth hud up` on local with an image whose `hud serve env.py` speaks
// HUD's protocol (the hudenv test server, since HUD's Python package cannot
// be installed here): it prints a tcp:// URL on which a HUD client says
// hello, lists the env's tasks and runs one; Ctrl-C deletes the sandbox and
// the URL stops answering.
func TestHUDUp(t *testing.T) {
	h := newHUDUpHost(t)
	cmd := h.berth("hud", "up", "--backend", "local", "--image", "test.local/hudenv:1", "--ttl", "30s")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncbuf.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var url string
	select {
	case url = <-lines:
	case <-time.After(3 * time.Minute):
		t.Fatalf("no URL within 3 minutes; stderr:\n%s", stderr.String())
	}
	if !strings.HasPrefix(url, "tcp://127.0.0.1:") {
		t.Fatalf("first stdout line %q, want a tcp:// URL; stderr:\n%s", url, stderr.String())
	}
	live := h.live(t)
	if len(live) != 1 || live[0].Image != "test.local/hudenv:1" {
		t.Fatalf("sandboxes while up: %+v", live)
	}
	// The note precedes the URL in the process, but its pipe is copied by
	// another goroutine here: it may land a moment after the URL.
	named := func() bool {
		s := stderr.String()
		return strings.Contains(s, live[0].ID) && strings.Contains(s, "HUD_SERVE_PORT=8765")
	}
	for deadline := time.Now().Add(10 * time.Second); !named() && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if !named() {
		t.Fatalf("stderr names neither the sandbox %s nor the server's announcement:\n%s", live[0].ID, stderr.String())
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, err := hud.Dial(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.Hello(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if m.Env.Name != "hudenv-test" || !strings.HasPrefix(m.SessionID, "sess-") {
		t.Fatalf("hello: %+v", m)
	}
	tasks, err := c.ListTasks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 2 || tasks[0].ID != "count-files" || tasks[1].ID != "fix-bug" || tasks[1].Description != "Fix the failing test" {
		t.Fatalf("tasks.list: %+v", tasks)
	}
	r, err := c.Start(ctx, "fix-bug", nil)
	if err != nil || r["prompt"] != "Fix the failing test" {
		t.Fatalf("tasks.start: %v %v", r, err)
	}
	g, err := c.Grade(ctx, map[string]any{"answer": "fix-bug"})
	if err != nil || g.Score != 1 {
		t.Fatalf("tasks.grade: %+v %v", g, err)
	}
	var rpc *hud.Error
	if err := c.Call(ctx, "no.such.method", nil, nil); !errors.As(err, &rpc) || rpc.Code != hud.CodeMethodNotFound {
		t.Fatalf("an unknown method: %v", err)
	}
	if err := c.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close()

	// The deadline is re-armed ahead of the 30 s TTL while berth runs.
	before := live[0].ExpiresAt
	waitFor(t, 30*time.Second, func() bool {
		l := h.live(t)
		return len(l) == 1 && l[0].ExpiresAt.After(before)
	})

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("berth hud up after Ctrl-C: %v\n%s", err, stderr.String())
	}
	if l := h.live(t); len(l) != 0 {
		t.Fatalf("Ctrl-C left sandboxes: %+v", l)
	}
	if all, _ := h.prov.List(context.Background(), nil); len(all) != 0 {
		t.Fatalf("Ctrl-C left sandboxes: %+v", all)
	}
	if !strings.Contains(stderr.String(), "deleted sandbox "+live[0].ID) {
		t.Fatalf("stderr does not say the sandbox was deleted:\n%s", stderr.String())
	}
	if c, err := hud.Dial(ctx, url); err == nil {
		_, err = c.Hello(ctx, "")
		c.Close()
		if err == nil {
			t.Fatalf("%s still answers hello after Ctrl-C", url)
		}
	}
}

// A server that exits before it answers hello fails `berth hud up` with
// its exit code and output, and its sandbox is deleted.
func TestHUDUpServerExits(t *testing.T) {
	h := newHUDUpHost(t)
	cmd := h.berth("hud", "up", "--backend", "local", "--image", "test.local/hudenv:1",
		"--cmd", "echo env.py is broken >&2; exit 3")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("berth hud up: %v, want exit 1\n%s", err, stderr.String())
	}
	if stdout.Len() != 0 || !strings.Contains(stderr.String(), "exited with code 3 before answering hello") ||
		!strings.Contains(stderr.String(), "env.py is broken") {
		t.Fatalf("stdout %q, stderr:\n%s", stdout.String(), stderr.String())
	}
	if l := h.live(t); len(l) != 0 {
		t.Fatalf("a failed up left sandboxes: %+v", l)
	}
}
