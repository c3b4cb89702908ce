package fakeengine_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/syncbuf"
	"github.com/berth-sh/berth/internal/testing/busyroot"
	"github.com/berth-sh/berth/internal/testing/fakeengine"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

func newEngine(t *testing.T, o fakeengine.Options) *fakeengine.Engine {
	t.Helper()
	o.Dir = t.TempDir()
	e, err := fakeengine.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

func create(t *testing.T, e *fakeengine.Engine, s fakeengine.Spec) *fakeengine.Sandbox {
	t.Helper()
	if s.ID == "" {
		s.ID = "sb-" + fakeengine.RandomHex(6)
	}
	sb, err := e.Create(s)
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// TestExpiryIsExact pins the one expiry rule (the fakes had a timer, a
// reaper ticking at a twentieth of a minute, a sweep at each call with
// "after" and one with "at or after"): from its deadline on a sandbox is
// ended to every lookup, before any timer has run, and a deadline moved
// later keeps it alive.
func TestExpiryIsExact(t *testing.T) {
	e := newEngine(t, fakeengine.Options{OnExpire: func(*fakeengine.Sandbox) {}}) // a wire that tears down late
	sb := create(t, e, fakeengine.Spec{TTL: time.Hour})
	sb.SetDeadline(time.Now().Add(-time.Nanosecond))
	if why, _ := sb.Ended(); why != fakeengine.Expired {
		t.Fatalf("past its deadline the sandbox is %v, want expired", why)
	}
	if _, err := e.Get(sb.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("get past the deadline: %v, want NotFound", err)
	}
	if l := e.List(nil); len(l) != 0 {
		t.Errorf("list past the deadline: %d sandboxes, want none", len(l))
	}
	if _, err := sb.Stat("/", false); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("stat past the deadline: %v, want NotFound", err)
	}
	sb.SetDeadline(time.Now().Add(time.Hour))
	if _, err := e.Get(sb.ID); err != nil {
		t.Errorf("get after the deadline moved: %v", err)
	}

	// Without OnExpire the engine tears it down itself at the deadline.
	e2 := newEngine(t, fakeengine.Options{})
	sb2 := create(t, e2, fakeengine.Spec{TTL: 20 * time.Millisecond})
	select {
	case <-sb2.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the sandbox never ended at its deadline")
	}
	if _, err := os.Stat(sb2.Root()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the expired sandbox's tree is still there: %v", err)
	}
}

// TestEndedSandboxAnswers pins what an ended sandbox is (the fakes made it
// vanish, answer 404 at once, stay queryable, or go through a state
// first): a record that says how and when it ended, whose tree and
// processes are gone, and on which every call is NotFound; ending it again
// is NotFound too.
func TestEndedSandboxAnswers(t *testing.T) {
	e := newEngine(t, fakeengine.Options{})
	sb := create(t, e, fakeengine.Spec{Labels: map[string]string{"k": "v"}})
	p, err := sb.Exec(t.Context(), fakeengine.Command{Args: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.End(fakeengine.Deleted); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("End returned with the sandbox's command still running")
	}
	if ex := p.Exit(); ex.Signal != syscall.SIGKILL {
		t.Errorf("the command ended %+v, want killed", ex)
	}
	if got := e.Lookup(sb.ID); got != sb {
		t.Fatalf("lookup of the ended sandbox = %v, want its record", got)
	}
	if why, at := sb.Ended(); why != fakeengine.Deleted || at.IsZero() {
		t.Errorf("ended = %v at %v, want deleted with a time", why, at)
	}
	if _, err := os.Stat(sb.Root()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the tree is still there: %v", err)
	}
	for name, err := range map[string]error{
		"get":   func() error { _, err := e.Get(sb.ID); return err }(),
		"write": func() error { _, err := sb.WriteFile("/f", strings.NewReader("x"), 0); return err }(),
		"exec":  func() error { _, err := sb.Exec(t.Context(), fakeengine.Command{Args: []string{"true"}}); return err }(),
		"end":   sb.End(fakeengine.Deleted),
	} {
		if !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("%s on the ended sandbox: %v, want NotFound", name, err)
		}
	}
	if l := e.List(map[string]string{"k": "v"}); len(l) != 0 {
		t.Errorf("list shows the ended sandbox")
	}
}

// TestSymlinksResolveInside pins symlink handling (the fakes went through
// os.Root, which refuses an absolute link, or a host path, which follows
// one onto the host): a link resolves as inside the sandbox, an absolute
// one from the sandbox's "/", so nothing reaches the host's files; Stat
// describes the link itself unless asked to follow.
func TestSymlinksResolveInside(t *testing.T) {
	e := newEngine(t, fakeengine.Options{})
	sb := create(t, e, fakeengine.Spec{})
	host := filepath.Join(t.TempDir(), "host.txt")
	if err := os.WriteFile(host, []byte("host"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.WriteFile("/etc/real", strings.NewReader("inside"), 0); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"abs": "/etc/real", "escape": host, "up": "../../../../.." + host} {
		if err := os.Symlink(target, filepath.Join(sb.Root(), link)); err != nil {
			t.Fatal(err)
		}
	}
	if b, err := sb.ReadFile("/abs"); err != nil || string(b) != "inside" {
		t.Errorf("read through an absolute link = %q, %v; want the sandbox's /etc/real", b, err)
	}
	for _, link := range []string{"/escape", "/up"} {
		if b, err := sb.ReadFile(link); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("read through %s = %q, %v; want not found inside the sandbox", link, b, err)
		}
		// As inside: the target's directories are not in the sandbox.
		if _, err := sb.WriteFile(link, strings.NewReader("pwned"), 0o777); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("write through %s: %v, want not found inside the sandbox", link, err)
		}
	}
	if b, _ := os.ReadFile(host); string(b) != "host" {
		t.Errorf("the host's file now holds %q", b)
	}
	if fi, err := sb.Stat("/abs", false); err != nil || fi.Type != fakeengine.FileSymlink || fi.Target != "/etc/real" {
		t.Errorf("stat of the link = %+v, %v; want the link itself", fi, err)
	}
	if fi, err := sb.Stat("/abs", true); err != nil || fi.Type != fakeengine.FileRegular || fi.Size != 6 {
		t.Errorf("followed stat of the link = %+v, %v; want its target", fi, err)
	}
	if l, err := sb.List("/", true); err != nil || len(l) != 2 || l[0].Type != fakeengine.FileRegular {
		t.Errorf("followed list of / = %+v, %v; want abs as its target and etc, the dangling links left out", l, err)
	}
	if l, err := sb.List("/", false); err != nil || len(l) != 4 || l[0].Type != fakeengine.FileSymlink {
		t.Errorf("list of / = %+v, %v; want the four entries, abs as a link", l, err)
	}
}

// TestFileModes pins file modes (the fakes made new files 0600 then the
// caller's, 0666 less the umask, or 0644, and directories 0750 or 0755):
// new files 0644, new directories 0755, whatever the umask; an existing
// file keeps its mode unless the call names one.
func TestFileModes(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	e := newEngine(t, fakeengine.Options{})
	sb := create(t, e, fakeengine.Spec{})
	mode := func(p string) fs.FileMode {
		t.Helper()
		fi, err := sb.Stat(p, false)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode.Perm()
	}
	if _, err := sb.WriteFile("/a/b/new", strings.NewReader("x"), 0); err != nil {
		t.Fatal(err)
	}
	if m, d := mode("/a/b/new"), mode("/a/b"); m != 0o644 || d != 0o755 {
		t.Errorf("new file %o in new directory %o, want 0644 in 0755", m, d)
	}
	if err := sb.Chmod("/a/b/new", 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.WriteFile("/a/b/new", strings.NewReader("y"), 0); err != nil {
		t.Fatal(err)
	}
	if m := mode("/a/b/new"); m != 0o700 {
		t.Errorf("overwritten file %o, want its 0700 kept", m)
	}
	if _, err := sb.WriteFile("/a/b/new", strings.NewReader("z"), 0o640); err != nil {
		t.Fatal(err)
	}
	if m := mode("/a/b/new"); m != 0o640 {
		t.Errorf("file written with 0640 is %o", m)
	}
	if err := sb.Mkdir("/c/d", 0o750, true); err != nil {
		t.Fatal(err)
	}
	if m, d := mode("/c/d"), mode("/c"); m != 0o750 || d != 0o755 {
		t.Errorf("mkdir 0750 made %o under %o, want 0750 under 0755", m, d)
	}
}

// TestExecRefusalIsAnExit: a program that cannot run ends as a shell
// reports it, its complaint on stderr; a missing working directory is
// ErrWorkDir.
func TestExecRefusalIsAnExit(t *testing.T) {
	e := newEngine(t, fakeengine.Options{})
	sb := create(t, e, fakeengine.Spec{WorkDir: "/work"})
	var stderr syncbuf.Buffer
	p, err := sb.Exec(t.Context(), fakeengine.Command{Args: []string{"no-such-program"}, Stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	if ex := p.Exit(); ex.Code != 127 || !strings.Contains(stderr.String(), "command not found") {
		t.Errorf("missing program: %+v, stderr %q; want 127 and the shell's complaint", ex, stderr.String())
	}
	_, err = sb.Exec(t.Context(), fakeengine.Command{Args: []string{"true"}, Dir: "/nowhere"})
	if !errors.Is(err, fakeengine.ErrWorkDir) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("exec in a missing directory: %v, want ErrWorkDir and not-exist", err)
	}
	var out syncbuf.Buffer
	p, err = sb.Exec(t.Context(), fakeengine.Command{Args: []string{"sh", "-c", "pwd; echo $K"}, Env: map[string]string{"K": "v"}, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if ex := p.Exit(); ex.Code != 0 || out.String() != filepath.Join(sb.Root(), "work")+"\nv\n" {
		t.Errorf("sh in the work dir: %+v, %q", ex, out.String())
	}
}

// TestConfinedEndKillsWhatLeftTheGroup: ending a confined sandbox kills a
// process that left its command's group (setsid), which no group signal
// reaches.
func TestConfinedEndKillsWhatLeftTheGroup(t *testing.T) {
	bb, err := fakeengine.Busybox()
	if err != nil {
		t.Skip(err)
	}
	if os.Geteuid() != 0 {
		t.Skip("a process in another user namespace shows no root to find it by")
	}
	e := newEngine(t, fakeengine.Options{})
	sb := create(t, e, fakeengine.Spec{Layout: &busyroot.Root{Busybox: bb}})
	var out syncbuf.Buffer
	p, err := sb.Exec(t.Context(), fakeengine.Command{Args: []string{"sh", "-c", "setsid sleep 60 >/dev/null 2>&1 & echo $!"}, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if ex := p.Exit(); ex.Code != 0 {
		t.Fatalf("sh: %+v", ex)
	}
	pid := strings.TrimSpace(out.String())
	if _, err := os.Stat("/proc/" + pid); err != nil {
		t.Fatalf("the escaped sleep (%q) is not running: %v", pid, err)
	}
	if err := sb.End(fakeengine.Deleted); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil || bytes.Contains(b, []byte(") Z ")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the escaped sleep %s outlived its sandbox", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLogResumes: a Log read resumes at any offset and ends at eof once
// closed.
func TestLogResumes(t *testing.T) {
	l := fakeengine.NewLog()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	go func() {
		_, _ = l.Write([]byte("hello "))
		_, _ = l.Write([]byte("world"))
		l.Close()
	}()
	var got []byte
	for {
		b, eof, err := l.Read(ctx, len(got), 4)
		if err != nil {
			t.Fatal(err)
		}
		if eof {
			break
		}
		got = append(got, b...)
	}
	if string(got) != "hello world" {
		t.Errorf("read %q", got)
	}
	if b, _, _ := l.Since(6); string(b) != "world" {
		t.Errorf("since 6 = %q", b)
	}
}
