package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Every open Provider holds a lock file in <state>/owners for as long as
// it is open; Close removes it. A lock file that New can lock belonged to
// a process that died without Close (SIGKILL, a crash, the OOM killer),
// which may have left half-made sandboxes, pool members, mounts, cgroups
// and runtime state behind. New then cleans up as Reap does, plus runtime
// state that no sandbox directory names, so that nobody has to run
// `berth sandboxes reap` after a crash. Live sandboxes of the dead process
// are left alone: they end at their TTL (the agent's deadline), and their
// leftovers go with the next List, Connect or Reap, as always.

const ownersDir = "owners"

// crashCleanupTimeout bounds the clean-up New does after a crash.
const crashCleanupTimeout = 2 * time.Minute

// register takes this Provider's owner lock.
func (p *Provider) register() error {
	dir := filepath.Join(p.state, ownersDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("local: owners dir: %w", err)
	}
	f, err := os.CreateTemp(dir, "*.lock")
	if err != nil {
		return fmt.Errorf("local: owner lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		os.Remove(f.Name())
		return fmt.Errorf("local: owner lock: %w", err)
	}
	p.owner = f
	return nil
}

// unregister releases the owner lock (Close).
func (p *Provider) unregister() {
	if p.owner != nil {
		os.Remove(p.owner.Name())
		p.owner.Close()
		p.owner = nil
	}
}

// deadOwners removes the lock files nobody holds and returns how many
// there were: each is a process that died with this state dir open.
func (p *Provider) deadOwners() int {
	dir := filepath.Join(p.state, ownersDir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	dead := 0
	for _, e := range ents {
		name := filepath.Join(dir, e.Name())
		if !strings.HasSuffix(e.Name(), ".lock") || p.owner != nil && name == p.owner.Name() {
			continue
		}
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
			os.Remove(name) // under the lock: one cleaner per dead owner
			dead++
		}
		f.Close()
	}
	return dead
}

// cleanAfterCrash removes what dead owners left: ended and half-made
// sandboxes (Reap), then runtime state of containers whose sandbox
// directory is gone (a crash inside Delete, after the directory went).
func (p *Provider) cleanAfterCrash(dead int) {
	ctx, cancel := context.WithTimeout(context.Background(), crashCleanupTimeout)
	defer cancel()
	ids, err := p.Reap(ctx)
	orphans, oerr := p.reapRuntimeOrphans(ctx)
	if err = errors.Join(err, oerr); err != nil {
		p.log.Warn("local: cleaning up after a berth process that died failed; berth sandboxes reap retries", "error", err)
	}
	if len(ids)+len(orphans) > 0 {
		p.log.Info("local: cleaned up after a berth process that died", "dead_processes", dead, "sandboxes", ids, "runtime_state", orphans)
	}
}

// reapRuntimeOrphans deletes (forcibly: the init may live) the runtime's
// state of sandbox containers that have no sandbox directory.
func (p *Provider) reapRuntimeOrphans(ctx context.Context) ([]string, error) {
	ents, err := os.ReadDir(p.rt.Root)
	if err != nil {
		return nil, nil
	}
	var done []string
	var errs []error
	for _, e := range ents {
		id := e.Name()
		if !idPattern.MatchString(id) {
			continue
		}
		if _, err := os.Lstat(p.dir(id)); !errors.Is(err, os.ErrNotExist) {
			continue // a sandbox's own: Reap's business
		}
		out, err := exec.CommandContext(ctx, p.opts.Runtime, "--root", p.rt.Root, "delete", "--force", id).CombinedOutput()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s delete --force %s: %w: %s", p.opts.Runtime, id, err, out))
			continue
		}
		done = append(done, id)
	}
	return done, errors.Join(errs...)
}
