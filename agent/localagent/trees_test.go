package localagent

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/internal/testing/tartest"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

const testToken = "tree-token"

// serveTrees serves a tree route acting as user and returns a client for
// it and a channel that receives once per finished request.
func serveTrees(t *testing.T, user string) (TreeClient, <-chan struct{}) {
	t.Helper()
	ts := newTreeServer(testToken, user, newThreadBudget())
	done := make(chan struct{}, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { done <- struct{}{} }()
		ts.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return TreeClient{HTTP: srv.Client(), BaseURL: srv.URL, Token: testToken}, done
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// readTar lists an archive as name -> content ("dir", "-> target").
func readTar(t *testing.T, r io.Reader) (map[string]string, error) {
	t.Helper()
	out := map[string]string{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			out[h.Name] = "dir"
		case tar.TypeSymlink:
			out[h.Name] = "-> " + h.Linkname
		default:
			b, err := io.ReadAll(tr)
			if err != nil {
				return out, err
			}
			out[h.Name] = string(b)
		}
	}
}

// A tree goes in through the route and comes back out the same; the
// directory is created on the way in.
func TestTreeRouteRoundTrip(t *testing.T) {
	c, _ := serveTrees(t, "")
	dir := filepath.Join(t.TempDir(), "new", "dir")
	in := tartest.Build(t,
		tartest.Dir("sub/"),
		tartest.File("sub/f.txt", "data"), tartest.File("a.txt", "alpha"),
		tartest.Symlink("link", "sub/f.txt"))
	if err := c.Upload(ctx(t), dir, bytes.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "link")); err != nil || string(b) != "data" {
		t.Errorf("through the uploaded link: %q %v", b, err)
	}
	rc, err := c.Download(ctx(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := readTar(t, rc)
	want := map[string]string{"sub/": "dir", "sub/f.txt": "data", "a.txt": "alpha", "link": "-> sub/f.txt"}
	if err != nil || len(got) != len(want) {
		t.Fatalf("downloaded %v, %v; want %v", got, err, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
}

// Without the token nothing happens; a missing path is NotFound from
// Download itself; an agent without the route (envd's 404) is NotSupported.
func TestTreeRouteRefusals(t *testing.T) {
	c, _ := serveTrees(t, "")
	dir := filepath.Join(t.TempDir(), "d")
	anon := c
	anon.Token = "wrong"
	if err := anon.Upload(ctx(t), dir, bytes.NewReader(tartest.Build(t, tartest.File("x", "x")))); errdefs.ClassOf(err) != errdefs.Unauthenticated {
		t.Errorf("upload with a wrong token: %v, want Unauthenticated", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a refused upload made its directory (%v)", err)
	}
	if _, err := anon.Download(ctx(t), "/"); errdefs.ClassOf(err) != errdefs.Unauthenticated {
		t.Errorf("download with a wrong token: %v, want Unauthenticated", err)
	}
	if _, err := c.Download(ctx(t), filepath.Join(dir, "missing")); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("download of a missing path: %v, want NotFound", err)
	}
	if err := c.Upload(ctx(t), "relative", bytes.NewReader(tartest.Build(t, tartest.File("x", "x")))); errdefs.ClassOf(err) != errdefs.InvalidArgument {
		t.Errorf("upload to a relative dir: %v, want InvalidArgument", err)
	}

	old, err := envd.NewServer(envd.ServerOptions{AccessToken: testToken})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	srv := httptest.NewServer(old)
	defer srv.Close()
	oc := TreeClient{HTTP: srv.Client(), BaseURL: srv.URL, Token: testToken}
	if _, err := oc.Download(ctx(t), "/"); errdefs.ClassOf(err) != errdefs.NotSupported {
		t.Errorf("download from an agent without the route: %v, want NotSupported", err)
	}
}

// The agent refuses archives that climb out of the directory on its own
// (nothing filtered them on the way), and the client hears why even when
// the refusal comes while it is still sending megabytes.
func TestTreeRouteUploadEscapes(t *testing.T) {
	c, _ := serveTrees(t, "")
	big := strings.Repeat("x", 8<<20)
	for name, es := range map[string][]tartest.Entry{
		"dot-dot":          {tartest.File("../escape", "x")},
		"absolute":         {tartest.File("/tmp/berth-abs-escape", "x")},
		"through symlink":  {tartest.Symlink("l", "../outside"), tartest.File("l/pwned", "x")},
		"absolute symlink": {tartest.Symlink("l", "/etc")},
		"then megabytes":   {tartest.File("../escape", "x"), tartest.File("big", big)},
	} {
		t.Run(name, func(t *testing.T) {
			base := t.TempDir()
			outside := filepath.Join(base, "outside")
			os.Mkdir(outside, 0o755)
			err := c.Upload(ctx(t), filepath.Join(base, "in"), bytes.NewReader(tartest.Build(t, es...)))
			if errdefs.ClassOf(err) != errdefs.InvalidArgument {
				t.Errorf("upload: %v, want InvalidArgument", err)
			}
			for _, p := range []string{filepath.Join(base, "escape"), filepath.Join(outside, "pwned"), "/tmp/berth-abs-escape"} {
				if _, err := os.Lstat(p); !os.IsNotExist(err) {
					t.Errorf("%s was written (%v)", p, err)
				}
			}
		})
	}
}

// Closing a download early drops the connection, which stops the agent's
// work: archiving a 1 TiB sparse file would otherwise run for minutes.
func TestTreeRouteDownloadCloseStops(t *testing.T) {
	c, done := serveTrees(t, "")
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "huge"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 40); err != nil {
		t.Skipf("no 1 TiB sparse file here: %v", err)
	}
	f.Close()
	rc, err := c.Download(ctx(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(rc, make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the agent still archives after the download was closed")
	}
}

// nobody returns the nobody account, skipping unless the test can switch to
// it (root, and the user exists).
func nobody(t *testing.T) *user.User {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("acting as another user needs root")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody here: %v", err)
	}
	return u
}

// Transfers act as the sandbox's default user, as the commands did: new
// files are that user's, and what the user may not read or write is
// refused. The switch stays on the transfer's own thread.
func TestTreeRouteActsAsUser(t *testing.T) {
	u := nobody(t)
	before := threadCreds(t)
	c, _ := serveTrees(t, "nobody")
	base := t.TempDir() // 0700 root: nobody may not enter it
	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	os.Chmod(base, 0o711)
	os.Chmod(filepath.Dir(base), 0o711)

	if err := c.Upload(ctx(t), filepath.Join(open, "up"), bytes.NewReader(tartest.Build(t, tartest.File("f", "x")))); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(open, "up"), filepath.Join(open, "up", "f")} {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil || u.Uid != strconv.FormatUint(uint64(st.Uid), 10) || u.Gid != strconv.FormatUint(uint64(st.Gid), 10) {
			t.Errorf("%s is owned by %d:%d (%v), want nobody's %s:%s", p, st.Uid, st.Gid, err, u.Uid, u.Gid)
		}
	}
	closed := filepath.Join(base, "closed")
	os.Mkdir(closed, 0o700)
	if err := c.Upload(ctx(t), closed, bytes.NewReader(tartest.Build(t, tartest.File("f", "x")))); errdefs.ClassOf(err) != errdefs.Unauthenticated {
		t.Errorf("upload into root's 0700 directory as nobody: %v, want Unauthenticated", err)
	}
	if _, err := os.Lstat(filepath.Join(closed, "f")); !os.IsNotExist(err) {
		t.Errorf("nobody wrote into root's 0700 directory (%v)", err)
	}
	os.WriteFile(filepath.Join(open, "secret"), []byte("s"), 0o600)
	if rc, err := c.Download(ctx(t), filepath.Join(open, "secret")); err == nil {
		_, err = readTar(t, rc)
		rc.Close()
		if err == nil {
			t.Error("nobody downloaded root's 0600 file")
		}
	}
	// Root's own transfers, after and beside nobody's, are still root's.
	rc, _ := serveTrees(t, "")
	if err := rc.Upload(ctx(t), filepath.Join(closed, "root"), bytes.NewReader(tartest.Build(t, tartest.File("f", "x")))); err != nil {
		t.Errorf("root's upload after nobody's: %v", err)
	}
	waitThreadCreds(t, before)
}

// A download cut by an error after its first bytes went out reads as that
// error, never as a clean end of a shorter archive.
func TestTreeRouteCutDownload(t *testing.T) {
	nobody(t)
	c, _ := serveTrees(t, "")
	nc, _ := serveTrees(t, "nobody")
	dir := filepath.Join(t.TempDir(), "tree")
	os.MkdirAll(filepath.Join(dir, "z-closed"), 0o700)
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(filepath.Dir(filepath.Dir(dir)), 0o755)
	os.Chmod(dir, 0o755)
	// More than the agent buffers, so the status is out before the error.
	os.WriteFile(filepath.Join(dir, "a-big"), bytes.Repeat([]byte("b"), 1<<20), 0o644)
	os.WriteFile(filepath.Join(dir, "z-closed", "f"), []byte("x"), 0o644)

	rc, err := c.Download(ctx(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := readTar(t, rc); err != nil || got["z-closed/f"] != "x" {
		t.Errorf("root's download: %v, %v", len(got), err)
	}
	rc.Close()

	rc, err = nc.Download(ctx(t), dir)
	if err != nil {
		t.Fatalf("nobody's download failed before its first byte: %v", err)
	}
	defer rc.Close()
	got, err := readTar(t, rc)
	if err == nil || errdefs.ClassOf(err) == errdefs.Unknown || !strings.Contains(err.Error(), "z-closed") {
		t.Errorf("nobody's cut download read %d entries and ended with %v; want a classed error naming z-closed", len(got), err)
	}
	if got["a-big"] == "" {
		t.Errorf("the entries before the error did not arrive: %v (%v)", len(got), err)
	}
}

// threadCreds is the Uid, Gid and Groups lines of every thread of this
// process but the main one, as a set. The runtime cannot end the main
// thread: a locked goroutine that exits there leaves it parked for good,
// running nothing, with whatever ids it had.
func threadCreds(t *testing.T) map[string]bool {
	t.Helper()
	tasks, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil {
		t.Fatal(err)
	}
	main := fmt.Sprintf("/proc/self/task/%d/status", os.Getpid())
	out := map[string]bool{}
	for _, p := range tasks {
		if p == main {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread ended
		}
		for line := range strings.Lines(string(b)) {
			if strings.HasPrefix(line, "Uid:") || strings.HasPrefix(line, "Gid:") || strings.HasPrefix(line, "Groups:") {
				out[strings.TrimSpace(line)] = true
			}
		}
	}
	return out
}

// waitThreadCreds waits for every thread to have one of the credentials
// seen before (threads that acted as someone else end after their
// goroutine, which may take a moment).
func waitThreadCreds(t *testing.T, want map[string]bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var odd []string
		for line := range threadCreds(t) {
			if !want[line] {
				odd = append(odd, line)
			}
		}
		if len(odd) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("threads kept another user's credentials: %q (before: %v)", odd, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
