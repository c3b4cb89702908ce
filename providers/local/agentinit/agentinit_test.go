package agentinit

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/sandbox/types"
)

// Main serves envd on the inherited socket with the token from the config
// pipe, runs commands in the configured directory, and returns nil at the
// deadline (the sandbox's TTL ending is a normal end).
func TestMainServesUntilDeadline(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "a.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	lf, err := ln.(*net.UnixListener).File()
	ln.Close()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg, err := WriteConfig(Config{Token: "tok-123", Deadline: time.Now().Add(time.Second), Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- Main(context.Background(), Options{ListenFD: int(lf.Fd()), ConfigFD: int(cfg.Fd()), Logf: t.Logf})
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hc := envd.UnixHTTPClient(sock)
	defer hc.CloseIdleConnections()
	anon, _ := envd.NewClient(envd.UnixBaseURL, hc)
	if _, err := anon.Stat(ctx, "/"); types.ClassOf(err) != types.Unauthenticated {
		t.Errorf("call without the token: %v", err)
	}
	c, _ := envd.NewClient(envd.UnixBaseURL, hc, envd.WithAccessToken("tok-123"))
	defer c.Close()
	var out bytes.Buffer
	p, err := c.Exec(ctx, types.Command{Args: []string{"pwd"}, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(ctx); err != nil || code != 0 || strings.TrimSpace(out.String()) != dir {
		t.Errorf("pwd: %d %v %q, want %s", code, err, out.String(), dir)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Main at its deadline: %v, want nil", err)
		}
	case <-ctx.Done():
		t.Fatal("Main did not return at its deadline")
	}
}

func TestConfigRoundTrip(t *testing.T) {
	want := Config{Token: "secret", Deadline: time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC), User: "app", Dir: "/w"}
	f, err := WriteConfig(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadConfig(int(f.Fd()))
	if err != nil || got != want {
		t.Errorf("ReadConfig = %+v, %v; want %+v", got, err, want)
	}
	if _, err := f.Stat(); err == nil {
		t.Error("ReadConfig left the fd open")
	}
}

// The helpers' classes survive the trip through an exit status.
func TestExitClasses(t *testing.T) {
	for _, c := range []types.Class{types.InvalidArgument, types.NotFound} {
		err := ExitError("op", ExitCode(types.Errorf(c, "boom")), "boom\n")
		if types.ClassOf(err) != c || !strings.Contains(err.Error(), "op: boom") {
			t.Errorf("%v: %v", c, err)
		}
	}
	if ExitError("op", 0, "") != nil || ExitCode(nil) != 0 {
		t.Error("success is not an error")
	}
	if err := ExitError("op", 1, ""); types.ClassOf(err) != types.Unknown {
		t.Errorf("plain failure: %v", err)
	}
}

// A tree goes out and back in; an entry that climbs out of the directory
// is refused as InvalidArgument and writes nothing outside.
func TestTarHelpers(t *testing.T) {
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "sub"), 0o755)
	os.WriteFile(filepath.Join(src, "sub", "f.txt"), []byte("data"), 0o640)
	os.Symlink("sub/f.txt", filepath.Join(src, "link"))
	var tarball bytes.Buffer
	if err := WriteTar(context.Background(), src, &tarball); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "new", "dir")
	if err := ExtractTar(context.Background(), dst, bytes.NewReader(tarball.Bytes())); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "link")); err != nil || string(b) != "data" {
		t.Errorf("through the copied link: %q %v", b, err)
	}
	if err := WriteTar(context.Background(), filepath.Join(src, "missing"), &bytes.Buffer{}); !errors.Is(err, types.ErrNotFound) {
		t.Errorf("missing path: %v", err)
	}
	evil := t.TempDir()
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	tw.WriteHeader(&tar.Header{Name: "../xx", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1})
	tw.Write([]byte("x"))
	tw.Close()
	err := ExtractTar(context.Background(), filepath.Join(evil, "in"), bytes.NewReader(raw.Bytes()))
	if types.ClassOf(err) != types.InvalidArgument {
		t.Errorf("escaping entry: %v, want InvalidArgument", err)
	}
	if _, err := os.Stat(filepath.Join(evil, "xx")); !os.IsNotExist(err) {
		t.Errorf("an entry escaped the directory (%v)", err)
	}
}
