package servetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/berth-sh/berth/internal/testing/localtest"
	"github.com/berth-sh/berth/internal/testing/testbin"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/providers/local/image"
	"github.com/berth-sh/berth/providers/local/image/seed"
	"github.com/berth-sh/berth/sandbox"
)

// BashImage is the local backend's "base" template in the tests: the
// seeded busybox rootfs plus a /bin/bash that execs busybox sh, since the
// SDKs run every command as /bin/bash -l -c and busybox has no bash.
const BashImage = "berth.local/busybox-bash:test"

// localBackend is what the local provider needs in the tests, made once
// per test process on first use (the agent build costs seconds): the
// static agent binary, the BashImage rootfs tar, and a cgroup parent of the
// tests' own that Main checks is empty at the end. Each test gets a
// state dir of its own (states), so that tests running in parallel see
// only their own sandboxes.
var localBackend struct {
	once   sync.Once
	skip   string
	err    error
	dir    string // holds rootfs
	rootfs string
	agent  string
	cgroup string

	mu     sync.Mutex
	states []string
}

// OpenLocal opens the local provider on a new state dir holding BashImage,
// or skips without root, runc or busybox-static. Its cleanup, which runs
// after the cleanups of a server made later in the test, fails the test
// when a sandbox or a mount is left, and removes the state dir.
func OpenLocal(t testing.TB) *sandbox.Provider {
	t.Helper()
	return OpenLocalLogged(t, nil)
}

// OpenLocalLogged is OpenLocal with the provider's logs sent to log.
func OpenLocalLogged(t testing.TB, log *slog.Logger) *sandbox.Provider {
	t.Helper()
	lb := &localBackend
	lb.once.Do(setupLocal)
	if lb.skip != "" {
		t.Skip(lb.skip)
	}
	if lb.err != nil {
		t.Fatal(lb.err)
	}
	// Short: the agents' socket paths live under it (108-byte limit).
	state, err := os.MkdirTemp("", "berth-serve-")
	if err != nil {
		t.Fatal(err)
	}
	lb.mu.Lock()
	lb.states = append(lb.states, state)
	lb.mu.Unlock()
	if err := importBashImage(state, lb.rootfs); err != nil {
		t.Fatal(err)
	}
	d, err := local.New(local.Options{StateDir: state, AgentBinary: lb.agent, CgroupParent: lb.cgroup, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	p := sandbox.NewProvider("local", d)
	t.Cleanup(func() {
		defer p.Close()
		infos, err := p.List(context.Background(), nil)
		if err != nil || len(infos) != 0 {
			t.Errorf("local sandboxes left after the test: %+v %v", infos, err)
			return // TestMain reports and removes them
		}
		if m := localtest.MountsUnder(state); len(m) > 0 {
			t.Errorf("mounts left after the test: %v", m)
			return
		}
		os.RemoveAll(state)
	})
	return p
}

func setupLocal() {
	lb := &localBackend
	if lb.skip = testbin.LocalMissing(); lb.skip != "" {
		return
	}
	if _, err := seed.FindBusybox(); err != nil {
		lb.skip = err.Error()
		return
	}
	if lb.dir, lb.err = os.MkdirTemp("", "berth-serve-image-"); lb.err != nil {
		return
	}
	lb.rootfs = filepath.Join(lb.dir, "bash-rootfs.tar")
	if lb.err = localtest.WriteBashRootfs(lb.rootfs); lb.err != nil {
		return
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	lb.cgroup = "berth-serve-test-" + hex.EncodeToString(b)
	lb.agent, lb.err = testbin.Berth()
}

// importBashImage imports the rootfs tar as BashImage into the image
// store in state.
func importBashImage(state, rootfs string) error {
	st, err := image.Open(state, image.Options{})
	if err != nil {
		return err
	}
	_, err = st.Import(context.Background(), BashImage, rootfs)
	return err
}

// cleanupLocal runs after every test: it reports what the local backend's
// tests left (sandbox directories and mounts under their state dirs,
// cgroups under the tests' parent), deletes it, then removes the state
// dirs, the cgroup parent, the rootfs tar and the agent binary.
func cleanupLocal() []string {
	lb := &localBackend
	if lb.dir == "" {
		return nil
	}
	defer testbin.Cleanup()
	defer os.RemoveAll(lb.dir)
	return localtest.Sweep(local.Options{AgentBinary: lb.agent, CgroupParent: lb.cgroup}, lb.states...)
}
