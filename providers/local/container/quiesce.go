package container

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// KillAllButInit ends every process of the container except its init and
// returns once they are gone from its cgroups. The cgroup is frozen while
// the processes are listed and signalled, so that none forks a new one
// meanwhile (a fork bomb included); the kill goes through a pidfd, so a
// pid reused since the listing is never hit. Without a freezer it lists
// and kills until nothing but the init is left.
//
// The Dockerfile builder calls it after each RUN: what a step left running
// must not touch the tree while the host writes into it.
func (ct *Container) KillAllButInit(ctx context.Context) error {
	ct.mu.Lock()
	deleted := ct.deleted
	ct.mu.Unlock()
	if deleted {
		return fmt.Errorf("container %s: %w", ct.id, errDeleted)
	}
	if isGVisor(ct.bin) {
		return errdefs.Errorf(errdefs.NotSupported, "container %s: under runsc the container's processes are gVisor's, not the host's", ct.id)
	}
	if len(ct.procs()) == 0 {
		return nil // the usual case: the step left nothing running
	}
	fz := ct.freezer()
	for round := 0; ; round++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if fz != nil {
			if err := fz.freeze(ctx); err != nil {
				return err
			}
		}
		pids := ct.procs()
		for _, pid := range pids {
			if p, err := openProc(pid, 0); err == nil {
				_ = p.signal(unix.SIGKILL)
				p.close()
			}
		}
		if fz != nil {
			if err := fz.thaw(); err != nil {
				return err
			}
		}
		if len(pids) == 0 {
			return nil
		}
		if err := ct.waitProcsGone(ctx, pids); err != nil {
			return err
		}
		if round > 100 {
			return fmt.Errorf("container %s: processes keep appearing: %v", ct.id, ct.procs())
		}
	}
}

// procs lists the pids in the container's cgroups, its init excepted.
func (ct *Container) procs() []int {
	var out []int
	for _, dir := range ct.cgroups {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 0 && pid != ct.pid && !slices.Contains(out, pid) {
				out = append(out, pid)
			}
		}
	}
	return out
}

// waitProcsGone waits until none of pids is in the container's cgroups.
func (ct *Container) waitProcsGone(ctx context.Context, pids []int) error {
	ctx, cancel := context.WithTimeout(ctx, killTimeout)
	defer cancel()
	for {
		left := ct.procs()
		if !slices.ContainsFunc(pids, func(p int) bool { return slices.Contains(left, p) }) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("container %s: processes %v did not end after SIGKILL: %w", ct.id, left, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// freezer is the container's freezer: cgroup v1's freezer.state or
// cgroup v2's cgroup.freeze.
type freezer struct {
	file           string
	frozen, thawed string
	v1             bool
}

func (ct *Container) freezer() *freezer {
	if d, ok := ct.cgroups["freezer"]; ok {
		return &freezer{file: filepath.Join(d, "freezer.state"), frozen: "FROZEN", thawed: "THAWED", v1: true}
	}
	if d, ok := ct.cgroups["unified"]; ok {
		if _, err := os.Stat(filepath.Join(d, "cgroup.freeze")); err == nil {
			return &freezer{file: filepath.Join(d, "cgroup.freeze"), frozen: "1", thawed: "0"}
		}
	}
	return nil
}

// freeze freezes the cgroup and waits until it is frozen: v1 freezes
// asynchronously (FREEZING until every task stopped; writing FROZEN again
// retries the tasks that were busy in the kernel), v2 reports it in
// cgroup.events. A frozen task that gets SIGKILL still dies, at the thaw
// on v1.
func (f *freezer) freeze(ctx context.Context) error {
	if err := os.WriteFile(f.file, []byte(f.frozen), 0); err != nil {
		return fmt.Errorf("freeze: %w", err)
	}
	check, want := f.file, "FROZEN"
	if !f.v1 {
		check, want = filepath.Join(filepath.Dir(f.file), "cgroup.events"), "frozen 1"
	}
	ctx, cancel := context.WithTimeout(ctx, killTimeout)
	defer cancel()
	for {
		b, err := os.ReadFile(check)
		if err != nil {
			return fmt.Errorf("freeze: %w", err)
		}
		if strings.Contains(string(b), want) {
			return nil
		}
		select {
		case <-ctx.Done():
			_ = f.thaw()
			return fmt.Errorf("freeze %s: %w", f.file, ctx.Err())
		case <-time.After(time.Millisecond):
			if f.v1 {
				_ = os.WriteFile(f.file, []byte(f.frozen), 0)
			}
		}
	}
}

func (f *freezer) thaw() error {
	if err := os.WriteFile(f.file, []byte(f.thawed), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("thaw: %w", err)
	}
	return nil
}
