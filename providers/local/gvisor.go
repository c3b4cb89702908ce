package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/agent/localagent"
	"github.com/berth-sh/berth/providers/local/container"
	"github.com/berth-sh/berth/providers/local/image"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Under gVisor (Options.Runtime "runsc", Debian package runsc) the
// sandbox's system calls go to a kernel in user space instead of the
// host's: a kernel bug the seccomp filter lets through is no way out. runsc
// passes no file descriptors into a container, so the agent gets a host
// directory of the sandbox's own instead (<sandbox>/run, a small tmpfs,
// mounted at localagent.RunDirPath): the provider writes the Config there (root's
// alone, removed by the agent before anything else runs in the sandbox),
// and the agent listens on a socket there that runsc makes a real host
// socket (--host-uds=create). What gVisor does not give: network public
// (runsc runs with --network=none), the pool (a pooled sandbox's root is
// switched from the host) and image builds (the builder writes into the
// sandbox's root from the host and kills the processes a RUN left through
// the host's cgroup: both belong to the host's kernel, not gVisor's).
// BENCHMARKS.md has its cost.

const runDir = "run"

// isGVisor reports whether the runtime named in Options is runsc.
func isGVisor(runtime string) bool { return filepath.Base(runtime) == "runsc" }

// socketPath is where the agent of the sandbox in dir listens.
func (p *Provider) socketPath(dir string) string {
	if p.rt.IsGVisor() {
		return filepath.Join(dir, runDir, localagent.RunSocket)
	}
	return filepath.Join(dir, socketFile)
}

// runDirMount is the run directory's file system: a tmpfs of its own on
// the host, just big enough for the config (at most 64 KiB) and the
// socket. It is writable from inside (the agent makes its socket there),
// and a plain directory would take whatever a sandbox process writes into
// it on the state directory's file system, past any disk limit
// (TestAttackFillRunDirGVisor). removeSandboxDir unmounts it.
const runDirMount = "size=256k,nr_inodes=16,mode=0700"

// startGVisor runs the container with the agent as its init, its config
// and socket in the run directory.
func (p *Provider) startGVisor(ctx context.Context, m *meta, run launch, img image.Image, who identity, lim container.Limits, k poolKey, env map[string]string) (*container.Container, error) {
	dir := filepath.Join(p.dir(m.ID), runDir)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, runDirMount); err != nil {
		return nil, fmt.Errorf("mount the agent's run directory: %w", err)
	}
	err := localagent.WriteConfigFile(filepath.Join(dir, localagent.RunConfig), localagent.Config{
		Token: m.Token, Deadline: m.Expires, User: who.user, Dir: m.WorkDir, Env: envMap(img.Config.Env, env),
	})
	if err != nil {
		return nil, err
	}
	return p.rt.Create(ctx, container.Config{
		ID:         m.ID,
		LowerDirs:  img.Layers,
		Dir:        filepath.Join(p.dir(m.ID), containerDir),
		Init:       append(slices.Clone(run.argv), "agent", "--run-dir", localagent.RunDirPath),
		InitBinary: run.initBinary,
		Mounts:     append(slices.Clone(run.mounts), container.Mount{Source: dir, Target: localagent.RunDirPath}),
		Cwd:        m.WorkDir,
		User:       who.agent,
		Limits:     lim,
		Network:    k.network,
		DiskBytes:  k.disk,
	})
}

// waitSocket waits until the agent's socket accepts connections: under
// runsc the agent makes it (bind, then listen), so a first request could
// find nothing, or nothing listening yet, where under runc it queues.
func (p *Provider) waitSocket(ctx context.Context, socket string) error {
	if !p.rt.IsGVisor() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, agentStartTimeout)
	defer cancel()
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "unix", socket)
		if err == nil {
			c.Close()
			return nil
		}
		if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ECONNREFUSED) {
			return err
		}
		select {
		case <-ctx.Done():
			return errdefs.Errorf(errdefs.Unavailable, "the agent's socket %s does not answer: %v", socket, err)
		case <-time.After(time.Millisecond):
		}
	}
}

// removeSandboxDir removes the directory of a sandbox whose container is
// gone: the run directory's tmpfs (runsc) first, or the removal would
// stop at its mount point.
func removeSandboxDir(dir string) error {
	if err := container.Unmount(filepath.Join(dir, runDir)); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}
