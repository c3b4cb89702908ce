package container

import (
	"context"
	"net/url"
	"os"
	"strings"
	"testing"
)

func TestCreateRunsAgentInit(t *testing.T) {
	needRoot(t)
	r := testRuntime(t)
	c, sock := agentConfig(t)
	c.Hostname = "box"
	ct := create(t, r, c)
	got := agentGet(t, sock, "/hello")
	if got != "pid=1 host=box" {
		t.Fatalf("agent says %q, want pid 1 in its own pid namespace with hostname box", got)
	}
	out := agentGet(t, sock, "/exec?"+url.Values{"arg": {"/bin/sh", "-c", "echo hi; exit 7"}}.Encode())
	if out != "exit=7\nhi\n" {
		t.Fatalf("exec through agent: %q", out)
	}
	// The agent binary is the host's file, mounted read-only.
	if out, code := execIn(t, r, ct, "sh", "-c", "echo x > /.berth/agent"); code == 0 {
		t.Fatalf("sandbox overwrote its agent binary: %q", out)
	}
	if fi, err := os.Stat(c.InitBinary); err != nil || fi.Size() < 1<<20 {
		t.Fatalf("host agent binary damaged: %v %v", fi, err)
	}
}

func TestDeleteLeavesNothing(t *testing.T) {
	needRoot(t)
	r := testRuntime(t)
	ct, err := r.Create(context.Background(), testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if out, code := execIn(t, r, ct, "cat", "/proc/1/cmdline"); code != 0 || !strings.HasPrefix(out, "/bin/sleep") {
		t.Fatalf("init is %q (exit %d)", out, code)
	}
	t.Logf("cgroups: %v", ct.CgroupPaths())
	deleteGone(t, r, ct)
}

func TestInitGetsEnvCwdUser(t *testing.T) {
	needRoot(t)
	r := testRuntime(t)
	c, sock := agentConfig(t)
	c.Env = []string{"FOO=bar baz"}
	c.Cwd = "/tmp"
	c.User = User{UID: 1000, GID: 1000, AdditionalGIDs: []uint32{2000}}
	create(t, r, c)
	out := agentGet(t, sock, "/exec?"+url.Values{"arg": {"/bin/sh", "-c", `echo "$FOO"; pwd; id -u; id -G; echo "$PATH"`}}.Encode())
	want := "exit=0\nbar baz\n/tmp\n1000\n1000 2000\n" + strings.TrimPrefix(defaultPath, "PATH=") + "\n"
	if out != want {
		t.Fatalf("got %q, want %q", out, want)
	}
}
