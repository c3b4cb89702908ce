package localagent

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/internal/testing/tartest"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
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
	// Main owns (and closes) the fds it is given: hand it duplicates, so
	// that no *os.File here closes a reused fd number later.
	lfd, cfd := dupFD(t, lf), dupFD(t, cfg)
	done := make(chan error, 1)
	go func() {
		done <- Main(context.Background(), Options{ListenFD: lfd, ConfigFD: cfd, Logf: t.Logf})
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hc := envd.UnixHTTPClient(sock)
	defer hc.CloseIdleConnections()
	anon, _ := envd.NewClient(envd.UnixBaseURL, hc)
	if _, err := anon.Stat(ctx, "/"); errdefs.ClassOf(err) != errdefs.Unauthenticated {
		t.Errorf("call without the token: %v", err)
	}
	c, _ := envd.NewClient(envd.UnixBaseURL, hc, envd.WithAccessToken("tok-123"))
	defer c.Close()
	var out bytes.Buffer
	p, err := c.Exec(ctx, driver.Command{Args: []string{"pwd"}, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(ctx); err != nil || code != 0 || strings.TrimSpace(out.String()) != dir {
		t.Errorf("pwd: %d %v %q, want %s", code, err, out.String(), dir)
	}
	// Trees are served next to envd, behind the same token.
	trees := TreeClient{HTTP: hc, BaseURL: envd.UnixBaseURL, Token: "tok-123"}
	if err := trees.Upload(ctx, filepath.Join(dir, "up"), bytes.NewReader(tartest.Build(t, tartest.File("f", "tree")))); err != nil {
		t.Errorf("upload through Main's socket: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "up", "f")); err != nil || string(b) != "tree" {
		t.Errorf("uploaded file: %q %v", b, err)
	}
	trees.Token = ""
	if _, err := trees.Download(ctx, dir); errdefs.ClassOf(err) != errdefs.Unauthenticated {
		t.Errorf("download without the token: %v", err)
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

// dupFD returns a duplicate of f's fd and closes f.
func dupFD(t *testing.T, f *os.File) int {
	t.Helper()
	fd, err := syscall.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	return fd
}

func TestConfigRoundTrip(t *testing.T) {
	want := Config{Token: "secret", Deadline: time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC), User: "app", Dir: "/w"}
	f, err := WriteConfig(want)
	if err != nil {
		t.Fatal(err)
	}
	fd := dupFD(t, f)
	got, err := ReadConfig(fd)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ReadConfig = %+v, %v; want %+v", got, err, want)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != syscall.EBADF {
		t.Errorf("ReadConfig left the fd open (fstat: %v)", err)
	}
}

// A tree goes out and back in; an entry that climbs out of the directory
// is refused as InvalidArgument and writes nothing outside.
func TestTarRoundTrip(t *testing.T) {
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "sub"), 0o755)
	os.WriteFile(filepath.Join(src, "sub", "f.txt"), []byte("data"), 0o640)
	os.Symlink("sub/f.txt", filepath.Join(src, "link"))
	var tarball bytes.Buffer
	if err := writeTar(context.Background(), src, &tarball); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "new", "dir")
	if err := extractTar(context.Background(), dst, bytes.NewReader(tarball.Bytes())); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "link")); err != nil || string(b) != "data" {
		t.Errorf("through the copied link: %q %v", b, err)
	}
	if err := writeTar(context.Background(), filepath.Join(src, "missing"), &bytes.Buffer{}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("missing path: %v", err)
	}
	evil := t.TempDir()
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	tw.WriteHeader(&tar.Header{Name: "../xx", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1})
	tw.Write([]byte("x"))
	tw.Close()
	err := extractTar(context.Background(), filepath.Join(evil, "in"), bytes.NewReader(raw.Bytes()))
	if errdefs.ClassOf(err) != errdefs.InvalidArgument {
		t.Errorf("escaping entry: %v, want InvalidArgument", err)
	}
	if _, err := os.Stat(filepath.Join(evil, "xx")); !os.IsNotExist(err) {
		t.Errorf("an entry escaped the directory (%v)", err)
	}
}
