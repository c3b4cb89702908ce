package hudserve_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/berth-sh/berth/hud"
	"github.com/berth-sh/berth/hud/hudserve"
)

// helperEnv makes the test binary a ProxyCommand: it opens a tunnel to
// the shell capability on the control channel named by the variable and
// splices it to stdin and stdout, as `berth hud tunnel` does.
const helperEnv = "BERTH_HUD_TUNNEL_TEST_ADDR"

func tunnelHelper() {
	c, err := hud.DialTunnel(contextBackground(), os.Getenv(helperEnv), hudserve.CapabilitySSH)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tunnel:", err)
		os.Exit(255)
	}
	hud.Splice(c, stdio{})
	os.Exit(0)
}

type stdio struct{}

func (stdio) Read(b []byte) (int, error)  { return os.Stdin.Read(b) }
func (stdio) Write(b []byte) (int, error) { return os.Stdout.Write(b) }
func (stdio) CloseWrite() error           { return os.Stdout.Close() }
func (stdio) Close() error                { os.Stdin.Close(); return os.Stdout.Close() }

// openssh runs Debian's ssh client against the session's shell binding,
// through the tunnel helper, with the binding's key and host key pinned.
type openssh struct {
	t          *testing.T
	addr       string
	key, known string
	stdin      string
}

func newOpenSSH(t *testing.T, addr string, b hud.Binding) *openssh {
	t.Helper()
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("ssh not installed (apt-get install openssh-client)")
	}
	dir := t.TempDir()
	return &openssh{t: t, addr: addr,
		key:   writeFile(t, dir, "id", b.Params["client_key"].(string), 0o600),
		known: writeFile(t, dir, "known_hosts", "hud "+b.Params["host_pubkey"].(string)+"\n", 0o600),
	}
}

// run runs ssh with extra options and the remote command; it returns
// stdout, stderr and the exit code.
func (o *openssh) run(user string, opts []string, command string) (string, string, int) {
	o.t.Helper()
	self, err := os.Executable()
	if err != nil {
		o.t.Fatal(err)
	}
	args := []string{"-F", "/dev/null", "-i", o.key, "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
		"-o", "UserKnownHostsFile=" + o.known, "-o", "StrictHostKeyChecking=yes", "-o", "HostKeyAlias=hud",
		"-o", "ProxyCommand=" + self, "-o", "LogLevel=ERROR", "-l", user}
	args = append(append(args, opts...), "hud")
	if command != "" {
		args = append(args, command)
	}
	cmd := exec.CommandContext(o.t.Context(), "ssh", args...)
	cmd.Env = append(os.Environ(), helperEnv+"="+o.addr)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if o.stdin != "" {
		cmd.Stdin = strings.NewReader(o.stdin)
	}
	err = cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		o.t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

// TestOpenSSHClient: Debian's ssh, through the tunnel, runs a command in
// the task's sandbox with separate stdout and stderr and its exit status;
// the command's effect is what the verifier then grades.
func TestOpenSSHClient(t *testing.T) {
	f := newFixture(t, hud.Limits{})
	c := f.client(t)
	b, _ := c.Binding("ssh")
	o := newOpenSSH(t, f.addr, b)

	// Before tasks.start there is no sandbox to run in.
	_, stderr, code := o.run("agent", nil, "true")
	if code != 255 || !strings.Contains(stderr, "no task in progress") {
		t.Errorf("before start: exit %d, stderr %q", code, stderr)
	}
	if _, err := c.Start(t.Context(), "answer", nil); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := o.run("agent", nil, "echo 42 > /tmp/answer; echo out; echo err >&2; exit 7")
	if stdout != "out\n" || stderr != "err\n" || code != 7 {
		t.Errorf("exec: stdout %q, stderr %q, exit %d", stdout, stderr, code)
	}
	// stdin reaches the command; without a command the shell request
	// runs a shell that reads it.
	o.stdin = "hello from stdin\n"
	if stdout, _, code := o.run("agent", nil, "cat; exit 3"); stdout != o.stdin || code != 3 {
		t.Errorf("stdin: %q, exit %d", stdout, code)
	}
	o.stdin = "echo from-shell; pwd; exit 4\n"
	if stdout, _, code := o.run("agent", nil, ""); stdout != "from-shell\n/\n" || code != 4 {
		t.Errorf("shell: %q, exit %d", stdout, code)
	}
	g, err := c.Grade(t.Context(), map[string]any{"answer": ""})
	if err != nil || g.Score != 1 || g.IsError {
		t.Fatalf("grade after the ssh command: %+v, %v", g, err)
	}
}

// TestSSHRefusals is the attack: with a valid key the client gets the
// sandbox's commands and nothing else. Port forwarding either way, stdio
// forwarding, subsystems (sftp), env injection and terminals are refused;
// another key, or the right key as another user, does not get in.
func TestSSHRefusals(t *testing.T) {
	f := newFixture(t, hud.Limits{})
	c := f.client(t)
	if _, err := c.Start(t.Context(), "answer", nil); err != nil {
		t.Fatal(err)
	}
	b, _ := c.Binding("shell")
	o := newOpenSSH(t, f.addr, b)

	port := f.addr[strings.LastIndex(f.addr, ":")+1:]
	for _, x := range []struct {
		name    string
		opts    []string
		command string
		stderr  string
	}{
		{"remote forward", []string{"-o", "ExitOnForwardFailure=yes", "-R", "0:127.0.0.1:" + port}, "true", "forwarding failed"},
		{"stdio forward to the host", []string{"-W", "127.0.0.1:" + port}, "", "forwarding failed"},
		{"sftp subsystem", []string{"-s"}, "sftp", "subsystem request failed"},
	} {
		_, stderr, code := o.run("agent", x.opts, x.command)
		if code == 0 || !strings.Contains(stderr, x.stderr) {
			t.Errorf("%s: exit %d, stderr %q; want a refusal mentioning %q", x.name, code, stderr, x.stderr)
		}
	}
	// env requests are refused: the variable never reaches the command.
	if stdout, _, code := o.run("agent", []string{"-o", "SetEnv=BERTH_EVIL=1"}, `echo "${BERTH_EVIL:-unset}"`); stdout != "unset\n" || code != 0 {
		t.Errorf("env injection: %q, exit %d", stdout, code)
	}
	// No terminal (the sandbox API has none): a forced one is refused,
	// and without -t the command runs with no terminal.
	if _, stderr, _ := o.run("agent", []string{"-tt"}, "true"); !strings.Contains(stderr, "PTY allocation request failed") {
		t.Errorf("pty: %q", stderr)
	}
	if stdout, _, _ := o.run("agent", nil, `if [ -t 0 ]; then echo tty; else echo notty; fi`); stdout != "notty\n" {
		t.Errorf("terminal: %q", stdout)
	}
	// The right key as another user, and another key, are refused.
	if _, stderr, code := o.run("root", nil, "true"); code != 255 || !strings.Contains(stderr, "Permission denied") {
		t.Errorf("user root: exit %d, %q", code, stderr)
	}
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, _ := ssh.MarshalPrivateKey(priv, "")
	stranger := &openssh{t: t, addr: f.addr, key: writeFile(t, t.TempDir(), "id", string(pem.EncodeToMemory(block)), 0o600), known: o.known}
	if _, stderr, code := stranger.run("agent", nil, "true"); code != 255 || !strings.Contains(stderr, "Permission denied") {
		t.Errorf("unknown key: exit %d, %q", code, stderr)
	}
	// The host key is pinned: a client expecting another one stops.
	other := &openssh{t: t, addr: f.addr, key: o.key, known: writeFile(t, t.TempDir(), "kh", "hud ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG9pRlHbMj1q1qYpWcmRaY4Qk2E6xVYwMKK3u1rQYd+J\n", 0o600)}
	if _, stderr, code := other.run("agent", nil, "true"); code != 255 || !strings.Contains(strings.ToLower(stderr), "host key") {
		t.Errorf("wrong host key: exit %d, %q", code, stderr)
	}
}
