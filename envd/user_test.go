package envd

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/berth-sh/berth/envd/envdproto"
	"github.com/berth-sh/berth/internal/syncbuf"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

func TestActingAsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("acting as another user needs root")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody")
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	e := unixEnv(t, ServerOptions{}, WithUser("nobody"))
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "new", "owned.txt")
	if err := e.client.WriteFile(ctxT(t), p, strings.NewReader("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{p, filepath.Dir(p)} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Sys().(*syscall.Stat_t).Uid; int(got) != uid {
			t.Errorf("%s owned by uid %d, want nobody (%d)", path, got, uid)
		}
	}
	st, err := e.client.Stat(ctxT(t), p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Type != driver.FileRegular || st.Size != 1 {
		t.Errorf("stat as nobody: %+v", st)
	}
	// Commands run as the client's user; HOME and USER follow it.
	code, out, _, err := run(t, e.client, driver.Command{Args: []string{"sh", "-c", `echo "$(id -u) $USER"`}})
	if err != nil || code != 0 || out != fmt.Sprintf("%d nobody\n", uid) {
		t.Fatalf("as nobody: %d %q %v", code, out, err)
	}
	// A command may name another user.
	code, out, _, err = run(t, e.client, driver.Command{Args: []string{"id", "-u"}, User: "root"})
	if err != nil || code != 0 || out != "0\n" {
		t.Fatalf("as root: %d %q %v", code, out, err)
	}
	// nobody may not write where only root may.
	code, _, _, err = run(t, e.client, driver.Command{Args: []string{"touch", "/root/berth-envd-test"}})
	if err != nil || code == 0 {
		t.Fatalf("nobody wrote into /root: %d %v", code, err)
	}
	if _, err := e.client.Exec(ctxT(t), driver.Command{Args: []string{"true"}, User: "no-such-user-berth"}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("unknown user: %v, want InvalidArgument", err)
	}
}

func TestConcurrentExecs(t *testing.T) {
	e := unixEnv(t, ServerOptions{})
	ctx := ctxT(t)
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out syncbuf.Buffer
			p, err := e.client.Exec(ctx, driver.Command{Args: []string{"echo", strconv.Itoa(i)}, Stdout: &out})
			if err != nil {
				errs <- err
				return
			}
			if code, err := p.Wait(ctx); err != nil || code != 0 || out.String() != fmt.Sprintf("%d\n", i) {
				errs <- fmt.Errorf("exec %d: code %d out %q err %v", i, code, out.String(), err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestRelativePathsAndDepth(t *testing.T) {
	dir := t.TempDir()
	e := unixEnv(t, ServerOptions{DefaultDir: dir})
	if err := e.client.WriteFile(ctxT(t), "rel/a.txt", strings.NewReader("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "rel", "a.txt")); err != nil || string(b) != "a" {
		t.Fatalf("relative path not taken from the default dir: %q %v", b, err)
	}
	code, out, _, err := run(t, e.client, driver.Command{Args: []string{"pwd"}})
	if err != nil || code != 0 || out != dir+"\n" {
		t.Fatalf("default cwd: %q %v", out, err)
	}
	res, err := e.client.listDir.CallUnary(ctxT(t), request(e.client, &envdproto.ListDirRequest{Path: dir, Depth: 2}, ""))
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, en := range res.Msg.Entries {
		paths = append(paths, strings.TrimPrefix(en.Path, dir))
	}
	if strings.Join(paths, ",") != "/rel,/rel/a.txt" {
		t.Fatalf("depth 2 listing: %v", paths)
	}
}
