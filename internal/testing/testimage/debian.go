package testimage

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// DebianSuite is the release Debian builds.
const DebianSuite = "bookworm"

// Debian returns a one-layer image of a Debian minbase rootfs (see
// DebianTar), with Docker's default PATH and bash as its command.
func Debian(t testing.TB) v1.Image {
	t.Helper()
	p := DebianTar(t)
	// Fastest gzip: the image is pushed to a loopback registry, not shipped.
	l, err := tarball.LayerFromFile(p, tarball.WithCompressedCaching, tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		t.Fatalf("testimage: debian layer: %v", err)
	}
	return Image(t, v1.Config{
		Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		Cmd: []string{"bash"},
	}, l)
}

// DebianTar returns the path of a plain rootfs tar of
// `debootstrap --variant=minbase bookworm` from the machine's apt mirror.
// The tar is cached (CacheDir) under a name holding the day it was built,
// so a machine builds it at most once a day (about 25 s); callers must not
// change it. It skips the test when debootstrap, root or the mirror is
// missing.
func DebianTar(t testing.TB) string {
	t.Helper()
	dir, err := CacheDir()
	if err != nil {
		t.Skipf("testimage: no cache dir for the Debian image: %v", err)
	}
	name := fmt.Sprintf("debian-%s-minbase-%s-%s.tar", DebianSuite, goarch, time.Now().UTC().Format("20060102"))
	final := filepath.Join(dir, name)
	if _, err := os.Stat(final); err == nil {
		return final
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		t.Skip("debootstrap not installed (apt-get install debootstrap)")
	}
	if os.Geteuid() != 0 {
		t.Skip("debootstrap needs root")
	}
	mirror, err := AptMirror()
	if err != nil {
		t.Skipf("testimage: %v", err)
	}
	if err := reachable(mirror); err != nil {
		t.Skipf("testimage: apt mirror %s unreachable: %v", mirror, err)
	}
	// One builder at a time, across test processes.
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(final); err == nil {
		return final
	}
	if err := buildDebian(dir, final, mirror); err != nil {
		t.Skipf("testimage: building the Debian image failed: %v", err)
	}
	return final
}

// CacheDir is where built test images are kept: $BERTH_TEST_CACHE, else
// $XDG_CACHE_HOME/berth-test, else /var/cache/berth-test for root, else
// ~/.cache/berth-test.
func CacheDir() (string, error) {
	dir := os.Getenv("BERTH_TEST_CACHE")
	switch {
	case dir != "":
	case os.Getenv("XDG_CACHE_HOME") != "":
		dir = filepath.Join(os.Getenv("XDG_CACHE_HOME"), "berth-test")
	case os.Geteuid() == 0:
		dir = "/var/cache/berth-test"
	default:
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(home, ".cache", "berth-test")
	}
	return dir, os.MkdirAll(dir, 0o755)
}

func buildDebian(dir, final, mirror string) (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root, err := os.MkdirTemp(dir, ".debootstrap-")
	if err != nil {
		return err
	}
	defer func() {
		unmountUnder(root)
		os.RemoveAll(root)
	}()
	cmd := exec.CommandContext(ctx, "debootstrap", "--variant=minbase", DebianSuite, root, mirror)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("debootstrap: %w: %s", err, tail(out, 2000))
	}
	unmountUnder(root)
	tmp := final + ".tmp"
	defer os.Remove(tmp)
	cmd = exec.CommandContext(ctx, "tar", "--numeric-owner", "--xattrs", "--xattrs-include=*",
		"--exclude=./var/cache/apt/archives/*.deb", "--exclude=./var/lib/apt/lists/*_*",
		"-C", root, "-cf", tmp, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("tar: %w: %s", err, tail(out, 2000))
	}
	if err := os.Rename(tmp, final); err != nil {
		return err
	}
	// Older days' builds are no longer used.
	old, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("debian-%s-minbase-%s-*.tar", DebianSuite, goarch)))
	for _, p := range old {
		if p != final {
			os.Remove(p)
		}
	}
	return nil
}

// unmountUnder detaches anything debootstrap left mounted in root (it
// mounts proc and sys while it works), deepest first, so that removing root
// cannot reach into them.
func unmountUnder(root string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && (fields[4] == root || strings.HasPrefix(fields[4], root+"/")) {
			mounts = append(mounts, fields[4])
		}
	}
	for i := len(mounts) - 1; i >= 0; i-- {
		syscall.Unmount(mounts[i], syscall.MNT_DETACH)
	}
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// AptMirror returns the Debian mirror apt is configured with (the first
// "deb" source for bookworm's main component), from /etc/apt/sources.list
// and /etc/apt/sources.list.d.
func AptMirror() (string, error) {
	files := []string{"/etc/apt/sources.list"}
	more, _ := filepath.Glob("/etc/apt/sources.list.d/*.list")
	files = append(files, more...)
	more, _ = filepath.Glob("/etc/apt/sources.list.d/*.sources")
	files = append(files, more...)
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var m string
		if strings.HasSuffix(p, ".sources") {
			m = mirrorDeb822(string(b))
		} else {
			m = mirrorOneLine(string(b))
		}
		if m != "" {
			return m, nil
		}
	}
	return "", errors.New("no Debian " + DebianSuite + " main source in /etc/apt/sources.list{,.d}")
}

func mirrorOneLine(s string) string {
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		if strings.HasPrefix(f[0], "[") { // options: [arch=amd64 signed-by=...]
			for len(f) > 0 && !strings.HasSuffix(f[0], "]") {
				f = f[1:]
			}
			if len(f) == 0 {
				continue
			}
			f = f[1:]
		}
		if len(f) >= 3 && f[1] == DebianSuite && contains(f[2:], "main") && isHTTP(f[0]) {
			return strings.TrimSuffix(f[0], "/")
		}
	}
	return ""
}

func mirrorDeb822(s string) string {
	for _, stanza := range strings.Split(s, "\n\n") {
		fields := map[string][]string{}
		for _, line := range strings.Split(stanza, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			fields[strings.ToLower(strings.TrimSpace(k))] = strings.Fields(v)
		}
		if len(fields["enabled"]) > 0 && fields["enabled"][0] == "no" {
			continue
		}
		if !contains(fields["types"], "deb") || !contains(fields["suites"], DebianSuite) || !contains(fields["components"], "main") {
			continue
		}
		for _, u := range fields["uris"] {
			if isHTTP(u) {
				return strings.TrimSuffix(u, "/")
			}
		}
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func isHTTP(u string) bool {
	return strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://")
}

func reachable(mirror string) error {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Head(mirror + "/dists/" + DebianSuite + "/Release")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return nil
}
