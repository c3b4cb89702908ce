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

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Start runs Init in a container made by Prepare (`runtime start`): the
// runtime's waiting init process execs it. It returns once the runtime has
// released the init, not when Init is ready.
func (ct *Container) Start(ctx context.Context) error {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.deleted {
		return errdefs.Errorf(errdefs.NotFound, "container %s: %w", ct.id, errDeleted)
	}
	if err := ct.rt.run(ctx, ct.bin, "start", ct.id); err != nil {
		return fmt.Errorf("start container %s: %w", ct.id, err)
	}
	return nil
}

// SetLimits replaces the container's cgroup limits by l (zero fields mean
// unlimited), writing the cgroup files directly: a pooled container gets
// its sandbox's limits in microseconds instead of a `runtime update`. The
// runtime's own record of the limits is not updated; nothing reads it.
func (ct *Container) SetLimits(l Limits) error {
	if err := l.validate(); err != nil {
		return err
	}
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.deleted {
		return errdefs.Errorf(errdefs.NotFound, "container %s: %w", ct.id, errDeleted)
	}
	var errs []error
	set := func(file, v string) bool {
		dir, ok := ct.cgroupWith(file)
		if !ok {
			return false
		}
		if err := os.WriteFile(filepath.Join(dir, file), []byte(v), 0); err != nil {
			errs = append(errs, fmt.Errorf("set %s of container %s: %w", file, ct.id, err))
		}
		return true
	}
	quota, v2quota := "-1", "max"
	if l.CPUs > 0 {
		q := strconv.FormatInt(int64(l.CPUs*cpuPeriod), 10)
		quota, v2quota = q, q
	}
	if !set("cpu.max", v2quota+" "+strconv.Itoa(cpuPeriod)) {
		set("cpu.cfs_period_us", strconv.Itoa(cpuPeriod))
		set("cpu.cfs_quota_us", quota)
	}
	pids := "max"
	if l.Pids > 0 {
		pids = strconv.FormatInt(l.Pids, 10)
	}
	set("pids.max", pids)
	if err := ct.setMemory(l.MemoryBytes); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// setMemory sets the memory limit with no swap, as the spec's Limit and
// Swap (equal) would: memory.max and memory.swap.max 0 on cgroup2; on v1
// memory.limit_in_bytes and memory.memsw.limit_in_bytes equal, written in
// the order that keeps memsw >= limit (the kernel refuses otherwise).
func (ct *Container) setMemory(n int64) error {
	v, swap := "max", "max"
	if n > 0 {
		v, swap = strconv.FormatInt(n, 10), "0"
	}
	if dir, ok := ct.cgroupWith("memory.max"); ok {
		if err := os.WriteFile(filepath.Join(dir, "memory.max"), []byte(v), 0); err != nil {
			return fmt.Errorf("set memory.max of container %s: %w", ct.id, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "memory.swap.max")); err == nil {
			if err := os.WriteFile(filepath.Join(dir, "memory.swap.max"), []byte(swap), 0); err != nil {
				return fmt.Errorf("set memory.swap.max of container %s: %w", ct.id, err)
			}
		}
		return nil
	}
	dir, ok := ct.cgroupWith("memory.limit_in_bytes")
	if !ok {
		if n > 0 {
			return fmt.Errorf("container %s has no memory cgroup to limit", ct.id)
		}
		return nil
	}
	v = "-1"
	if n > 0 {
		v = strconv.FormatInt(n, 10)
	}
	files := []string{"memory.limit_in_bytes"}
	if _, err := os.Stat(filepath.Join(dir, "memory.memsw.limit_in_bytes")); err == nil {
		files = append(files, "memory.memsw.limit_in_bytes")
	}
	write := func(order []string) error {
		for _, f := range order {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(v), 0); err != nil {
				return err
			}
		}
		return nil
	}
	err := write(files)
	if errors.Is(err, unix.EINVAL) && len(files) == 2 {
		// Raising: memsw must grow first.
		err = write([]string{files[1], files[0]})
	}
	if err != nil {
		return fmt.Errorf("set memory limit of container %s: %w", ct.id, err)
	}
	return nil
}

// cgroupWith finds the container's cgroup directory that has file: the
// v1 hierarchy of the file's controller ("cpu" in "cpu,cpuacct"), else
// the unified one.
func (ct *Container) cgroupWith(file string) (string, bool) {
	ctrl, _, _ := strings.Cut(file, ".")
	for name, dir := range ct.cgroups {
		if name != "unified" && slices.Contains(strings.Split(name, ","), ctrl) {
			_, err := os.Stat(filepath.Join(dir, file))
			return dir, err == nil
		}
	}
	dir, ok := ct.cgroups["unified"]
	if !ok {
		return "", false
	}
	_, err := os.Stat(filepath.Join(dir, file))
	return dir, err == nil
}
