// Package testbin builds berth's binaries for tests that need them as
// programs, not as code: the berth CLI, and berth-agent, which the local
// provider mounts into sandboxes as their init, so it must be static
// (CGO_ENABLED=0), and a test binary, linked with cgo, cannot stand in
// for it. It is built once per test
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

	"github.com/berth-sh/berth/providers/local/image/seed"
)

var (
	mu     sync.Mutex
	dir    string
	builds = map[target]*build{}
)

// target is one binary to build: a main package, linked static or as the
// environment's cgo setting links it.
type target struct {
	pkg    string // import path of a main package of this module
	name   string // file name in the build directory
	static bool
}

const cmdPath = "github.com/berth-sh/berth/cmd/"

type build struct {
	once sync.Once
	path string
	err  error
}

// Berth returns the path of a static berth binary built from this module's
// cmd/berth, building it on the first call (a few seconds, less when Go's
// build cache is warm). The agent (Agent) is built beside it, where a berth
// run as a program finds it.
func Berth() (string, error) {
	if _, err := Agent(); err != nil {
		return "", err
	}
	return get(target{cmdPath + "berth", "berth", true})
}

// Agent returns the path of a static berth-agent binary built from
// cmd/berth-agent: what the local provider mounts into sandboxes as their
// init (Options.AgentBinary) and the k8s provider's pods run.
func Agent() (string, error) { return get(target{cmdPath + "berth-agent", "berth-agent", true}) }

// AgentDefault returns a berth-agent built as `go build ./cmd/berth-agent`
// builds it, with the environment's cgo setting: dynamically linked where
// a C compiler is installed. seed.IsStatic reports which it is.
func AgentDefault() (string, error) {
	return get(target{cmdPath + "berth-agent", "berth-agent-default", false})
}

// Static returns a static build of the main package pkg (an import path
// of this module) named name, building it on the first call: a helper
// program that tests put into sandboxes. An error wrapping
// exec.ErrNotFound means there is no go command.
func Static(name, pkg string) (string, error) { return get(target{pkg, name, true}) }

func get(t target) (string, error) {
	mu.Lock()
	b := builds[t]
	if b == nil {
		b = &build{}
		builds[t] = b
	}
	mu.Unlock()
	b.once.Do(func() { b.path, b.err = compile(t) })
	return b.path, b.err
}

func compile(t target) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("testbin: no go command in PATH: %w", err)
	}
	mu.Lock()
	if dir == "" {
		sweep()
		if dir, err = os.MkdirTemp("", dirPrefix); err == nil {
			err = os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o600)
		}
	}
	d := dir
	mu.Unlock()
	if err != nil {
		return "", err
	}
	env := os.Environ()
	if t.static {
		env = append(env, "CGO_ENABLED=0")
	}
	out := filepath.Join(d, t.name)
	cmd := exec.Command(goBin, "build", "-o", out, t.pkg)
	cmd.Env = env
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("testbin: go build %s: %w\n%s", t.pkg, err, b)
	}
	if t.static {
		if s, err := seed.IsStatic(out); err != nil || !s {
			return "", fmt.Errorf("testbin: %s is not static despite CGO_ENABLED=0 (%v)", out, err)
		}
	}
	return out, nil
}

// Each build directory names the test process that owns it, so that a
// later process removes the directories of processes that are gone: a
// package without a TestMain calling Cleanup, or a test binary killed,
// would otherwise leave its binaries in the temp dir per run.
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
