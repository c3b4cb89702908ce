// Package testbin builds the berth binary for tests that need it as a
// program, not as code: the local provider mounts it into sandboxes as
// their agent, so it must be static (CGO_ENABLED=0), and a test binary,
// linked with cgo, cannot stand in for it. It is built once per test
// process into a temporary directory that Cleanup removes (or, when no
// TestMain called it, the next test process that builds: see sweep).
//
// Import it only from tests (TestMain of the local provider, the CLI
// scripts, the smoke and harbor tests that run on local).
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/image/seed"
)

var (
	mu     sync.Mutex
	dir    string
	builds = map[bool]*build{}
	extra  = map[string]*build{}
)

type build struct {
	once sync.Once
	path string
	err  error
}

// Berth returns the path of a static berth binary built from this module's
// cmd/berth, building it on the first call (a few seconds, less when Go's
// build cache is warm).
func Berth() (string, error) { return get(true) }

// BerthDefault returns a berth binary built as `go build ./cmd/berth`
// builds it, with the environment's cgo setting: dynamically linked where
// a C compiler is installed. seed.IsStatic reports which it is.
func BerthDefault() (string, error) { return get(false) }

func get(static bool) (string, error) {
	mu.Lock()
	b := builds[static]
	if b == nil {
		b = &build{}
		builds[static] = b
	}
	mu.Unlock()
	b.once.Do(func() { b.path, b.err = compile(static) })
	return b.path, b.err
}

// Static returns a static, stripped build of the main package pkg (an
// import path of this module) named name, building it on the first call
// with that name: a helper program that tests put into sandboxes. An
// error wrapping exec.ErrNotFound means there is no go command.
func Static(name, pkg string) (string, error) {
	mu.Lock()
	b := extra[name]
	if b == nil {
		b = &build{}
		extra[name] = b
	}
	mu.Unlock()
	b.once.Do(func() {
		var goBin, d string
		if goBin, d, b.err = buildDir(); b.err != nil {
			return
		}
		out := filepath.Join(d, name)
		cmd := exec.Command(goBin, "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if o, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("testbin: go build %s: %w\n%s", pkg, err, o)
			return
		}
		b.path = out
	})
	return b.path, b.err
}

// buildDir returns the go command and this process's build directory,
// making it on first use.
func buildDir() (goBin, d string, err error) {
	goBin, err = exec.LookPath("go")
	if err != nil {
		return "", "", fmt.Errorf("testbin: no go command in PATH: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if dir == "" {
		sweep()
		var made string
		if made, err = os.MkdirTemp("", dirPrefix); err == nil {
			err = os.WriteFile(filepath.Join(made, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o600)
		}
		if err != nil {
			return "", "", err
		}
		dir = made
	}
	return goBin, dir, nil
}

func compile(static bool) (string, error) {
	goBin, d, err := buildDir()
	if err != nil {
		return "", err
	}
	name, env := "berth-default", os.Environ()
	if static {
		name, env = "berth", append(env, "CGO_ENABLED=0")
	}
	out := filepath.Join(d, name)
	cmd := exec.Command(goBin, "build", "-o", out, "github.com/berth-sh/berth/cmd/berth")
	cmd.Env = env
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("testbin: go build ./cmd/berth: %w\n%s", err, b)
	}
	if static {
		if s, err := seed.IsStatic(out); err != nil || !s {
			return "", fmt.Errorf("testbin: %s is not static despite CGO_ENABLED=0 (%v)", out, err)
		}
	}
	return out, nil
}

// Each build directory names the test process that owns it, so that a
// later process removes the directories of processes that are gone: a
// package without a TestMain calling Cleanup, or a test binary killed,
// would otherwise leave a 38 MB binary in the temp dir per run.
const (
	dirPrefix = "berth-testbin-"
	ownerFile = "owner.pid"
)

// sweep removes the build directories whose owner process has exited.
func sweep() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, ownerFile))
		if err != nil {
			// No owner file: being made right now, or made before owners
			// were written; only the latter is old.
			if fi, serr := os.Stat(d); serr == nil && time.Since(fi.ModTime()) > time.Hour {
				os.RemoveAll(d)
			}
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if unix.Kill(pid, 0) == unix.ESRCH {
			os.RemoveAll(d)
		}
	}
}

// Main is the TestMain of a package that needs nothing else at its end:
// it runs the tests, removes the binaries they built and exits with their
// code.
func Main(m *testing.M) {
	code := m.Run()
	Cleanup()
	os.Exit(code)
}

// Cleanup removes the built binaries; call it at the end of TestMain.
func Cleanup() {
	mu.Lock()
	defer mu.Unlock()
	if dir != "" {
		os.RemoveAll(dir)
	}
}
