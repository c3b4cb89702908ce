package envd

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

func TestFilesRoundTrip(t *testing.T) {
	transports(t, func(t *testing.T, newEnv func(ServerOptions, ...ClientOption) *env) {
		e := newEnv(ServerOptions{})
		c, ctx := e.client, ctxT(t)
		dir := t.TempDir()
		p := filepath.Join(dir, "a", "b", "data.bin")
		payload := bytes.Repeat([]byte{0, 1, 2, 254, 255, '\n'}, 1<<20) // 6 MB, binary
		if err := c.WriteFile(ctx, p, bytes.NewReader(payload), 0o600); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("file not on disk: %v", err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("mode %v, want 0600", fi.Mode().Perm())
		}
		rc, err := c.ReadFile(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("read back %d bytes (err %v), want %d identical bytes", len(got), err, len(payload))
		}

		// Overwrite truncates and an explicit mode applies to an existing file.
		if err := c.WriteFile(ctx, p, strings.NewReader("short"), 0o755); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(p); string(b) != "short" {
			t.Fatalf("after overwrite: %q", b)
		}
		if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o755 {
			t.Errorf("mode after overwrite %v, want 0755", fi.Mode().Perm())
		}
		// No temporary upload file is left beside it.
		if ents, _ := os.ReadDir(filepath.Dir(p)); len(ents) != 1 {
			t.Errorf("directory holds %d entries, want only the file", len(ents))
		}

		st, err := c.Stat(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Name != "data.bin" || st.Path != p || st.Type != driver.FileRegular || st.Size != 5 || st.Mode != 0o755 || st.ModTime.IsZero() {
			t.Errorf("stat %+v", st)
		}

		// Stat does not follow a final symlink.
		link := filepath.Join(dir, "link")
		if err := os.Symlink(p, link); err != nil {
			t.Fatal(err)
		}
		st, err = c.Stat(ctx, link)
		if err != nil || st.Type != driver.FileSymlink || st.Target != p {
			t.Errorf("stat of symlink: %+v %v", st, err)
		}

		if err := c.MakeDir(ctx, filepath.Join(dir, "x", "y")); err != nil {
			t.Fatal(err)
		}
		if err := c.MakeDir(ctx, filepath.Join(dir, "x", "y")); !errors.Is(err, errdefs.ErrAlreadyExists) {
			t.Errorf("second make dir: %v, want AlreadyExists", err)
		}
		ents, err := c.ListDir(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name+":"+string(e.Type))
		}
		if strings.Join(names, ",") != "a:dir,link:symlink,x:dir" {
			t.Errorf("list %v", names)
		}

		if err := c.Move(ctx, p, filepath.Join(dir, "moved", "m.bin")); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, "moved", "m.bin")); err != nil {
			t.Errorf("moved file missing: %v", err)
		}
		if err := c.Remove(ctx, filepath.Join(dir, "x")); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, "x")); !os.IsNotExist(err) {
			t.Errorf("removed tree still there: %v", err)
		}
	})
}

func TestFilesErrorClasses(t *testing.T) {
	transports(t, func(t *testing.T, newEnv func(ServerOptions, ...ClientOption) *env) {
		e := newEnv(ServerOptions{})
		c, ctx := e.client, ctxT(t)
		dir := t.TempDir()
		missing := filepath.Join(dir, "missing")
		fifo := filepath.Join(dir, "fifo")
		if err := syscall.Mkfifo(fifo, 0o644); err != nil {
			t.Fatal(err)
		}
		checks := []struct {
			name string
			err  error
			want error
		}{
			{"read missing", func() error { _, err := c.ReadFile(ctx, missing); return err }(), errdefs.ErrNotFound},
			{"read dir", func() error { _, err := c.ReadFile(ctx, dir); return err }(), errdefs.ErrInvalidArgument},
			{"read fifo", func() error { _, err := c.ReadFile(ctx, fifo); return err }(), errdefs.ErrInvalidArgument},
			{"stat missing", func() error { _, err := c.Stat(ctx, missing); return err }(), errdefs.ErrNotFound},
			{"list missing", func() error { _, err := c.ListDir(ctx, missing); return err }(), errdefs.ErrNotFound},
			{"list file", func() error { _, err := c.ListDir(ctx, "/etc/hostname"); return err }(), errdefs.ErrInvalidArgument},
			{"remove missing", c.Remove(ctx, missing), errdefs.ErrNotFound},
			{"make dir over file", c.MakeDir(ctx, "/etc/hostname"), errdefs.ErrAlreadyExists},
			{"write over dir", c.WriteFile(ctx, dir, strings.NewReader("x"), 0o644), errdefs.ErrInvalidArgument},
			{"move missing", c.Move(ctx, missing, filepath.Join(dir, "y")), errdefs.ErrNotFound},
		}
		for _, ck := range checks {
			if !errors.Is(ck.err, ck.want) {
				t.Errorf("%s: %v, want %v", ck.name, ck.err, ck.want)
			}
		}
	})
}

func TestUploadReplacesPlantedSymlink(t *testing.T) {
	e := unixEnv(t, ServerOptions{})
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(outside, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(dir, "planted")
	if err := os.Symlink(outside, planted); err != nil {
		t.Fatal(err)
	}
	if err := e.client.WriteFile(ctxT(t), planted, strings.NewReader("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "keep" {
		t.Fatalf("the symlink's target was written: %q", b)
	}
	if fi, _ := os.Lstat(planted); fi == nil || !fi.Mode().IsRegular() {
		t.Fatal("the symlink was not replaced by a regular file")
	}
}

func TestOversizedInputsRefused(t *testing.T) {
	e := unixEnv(t, ServerOptions{MaxMessageBytes: 1 << 10, MaxUploadBytes: 1 << 20})
	c, ctx := e.client, ctxT(t)
	if _, err := c.Stat(ctx, "/"+strings.Repeat("a", 4<<10)); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Errorf("oversized message: %v, want ResourceExhausted", err)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "big")
	err := c.WriteFile(ctx, p, bytes.NewReader(make([]byte, 2<<20)), 0o644)
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "413") {
		t.Errorf("oversized upload: %v, want InvalidArgument (413)", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("a refused upload left %d files behind", len(ents))
	}
	// Just under the limit is fine.
	if err := c.WriteFile(ctx, p, bytes.NewReader(make([]byte, 1<<20)), 0o644); err != nil {
		t.Errorf("upload at the limit: %v", err)
	}
}

func TestAccessToken(t *testing.T) {
	transports(t, func(t *testing.T, newEnv func(ServerOptions, ...ClientOption) *env) {
		const secret = "s3cret-token"
		e := newEnv(ServerOptions{AccessToken: secret}, WithAccessToken(secret))
		ctx := ctxT(t)
		if code, _, _, err := run(t, e.client, driver.Command{Args: []string{"true"}}); err != nil || code != 0 {
			t.Fatalf("with the token: %d %v", code, err)
		}
		for name, opts := range map[string][]ClientOption{"no token": nil, "wrong token": {WithAccessToken("guess")}} {
			c, err := NewClient(e.url, e.hc, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			errs := map[string]error{}
			_, errs["exec"] = c.Exec(ctx, driver.Command{Args: []string{"true"}})
			_, errs["stat"] = c.Stat(ctx, "/")
			_, errs["processes"] = c.Processes(ctx)
			_, errs["read"] = c.ReadFile(ctx, "/etc/hostname")
			errs["write"] = c.WriteFile(ctx, filepath.Join(t.TempDir(), "f"), strings.NewReader("x"), 0o644)
			for op, err := range errs {
				if !errors.Is(err, errdefs.ErrUnauthenticated) {
					t.Errorf("%s: %s: %v, want Unauthenticated", name, op, err)
				}
				if err != nil && strings.Contains(err.Error(), secret) {
					t.Errorf("%s: %s: error echoes the token: %v", name, op, err)
				}
			}
			if err := c.Health(ctx); err != nil {
				t.Errorf("%s: health needs no token: %v", name, err)
			}
		}
	})
}

func TestRefusedStdinClosesStdin(t *testing.T) {
	// Chunks larger than the server accepts: the process must see EOF, not hang.
	e := unixEnv(t, ServerOptions{MaxMessageBytes: 1 << 10})
	code, out, _, err := run(t, e.client, driver.Command{Args: []string{"wc", "-c"}, Stdin: bytes.NewReader(make([]byte, 8<<10))})
	if err != nil || code != 0 || strings.TrimSpace(out) != "0" {
		t.Fatalf("wc: %d %q %v", code, out, err)
	}
}
