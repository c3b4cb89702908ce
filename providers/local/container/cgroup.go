package container

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// cgroupMount is one mounted cgroup hierarchy.
type cgroupMount struct {
	point string // where it is mounted, e.g. /sys/fs/cgroup/memory
	root  string // the cgroup path of the mount's root, usually "/"
}

// cgroupMounts maps each hierarchy of /proc/self/cgroup ("memory",
// "cpu,cpuacct", "name=systemd", "" for cgroup2) to where it is mounted.
func cgroupMounts() (map[string]cgroupMount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]cgroupMount{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 36 35 0:30 / /sys/fs/cgroup/memory rw,relatime shared:10 - cgroup cgroup rw,memory
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, x := range fields {
			if x == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+3 >= len(fields) || len(fields) < 5 {
			continue
		}
		m := cgroupMount{point: unescapeMountinfo(fields[4]), root: unescapeMountinfo(fields[3])}
		switch fields[sep+1] {
		case "cgroup2":
			if _, ok := out[""]; !ok {
				out[""] = m
			}
		case "cgroup":
			var ctrls []string
			for _, o := range strings.Split(fields[sep+3], ",") {
				if o == "rw" || o == "ro" || strings.HasPrefix(o, "release_agent=") || o == "clone_children" || o == "noprefix" || o == "xattr" || o == "cpuset_v2_mode" || o == "favordynmods" {
					continue
				}
				ctrls = append(ctrls, o)
			}
			sort.Strings(ctrls)
			key := strings.Join(ctrls, ",")
			if _, ok := out[key]; !ok {
				out[key] = m
			}
		}
	}
	return out, sc.Err()
}

// cgroupPaths returns the host directories of the cgroups pid is in, one per
// hierarchy, as seen from this process's cgroup namespace. Only cgroups whose
// path ends in suffix (the container's own, e.g. "berth/ID") are returned:
// a hierarchy the runtime did not place it in shows an ancestor's path, and
// teardown must never remove an ancestor. An empty suffix returns all.
func cgroupPaths(pid int, suffix string) (map[string]string, error) {
	if suffix != "" {
		suffix = "/" + strings.Trim(filepath.Clean(suffix), "/")
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, fmt.Errorf("read cgroup mounts: %w", err)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return nil, fmt.Errorf("read cgroups of pid %d: %w", pid, err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		// hierarchy-id:controllers:path
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		ctrls := strings.Split(parts[1], ",")
		sort.Strings(ctrls)
		key := strings.Join(ctrls, ",")
		m, ok := mounts[key]
		if !ok {
			continue // hierarchy not mounted here
		}
		rel := parts[2]
		if !strings.HasSuffix(rel, suffix) {
			continue
		}
		if m.root != "/" {
			rel = strings.TrimPrefix(rel, m.root)
		}
		name := key
		if name == "" {
			name = "unified"
		}
		out[name] = filepath.Join(m.point, rel)
	}
	return out, nil
}

// removeCgroups removes the cgroup directories the runtime left behind
// (runc removes them on delete; crun and a killed runc may not). Only the
// container's own directories are named here, never their parents.
func removeCgroups(paths map[string]string) error {
	var errs []error
	for _, p := range paths {
		if err := rmdirTree(p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// rmdirTree removes a cgroup directory and its child cgroups, deepest first
// (cgroupfs directories cannot be removed with their files, only rmdir'd).
func rmdirTree(p string) error {
	var dirs []string
	err := filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, q)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove cgroup %s: %w", p, err)
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := unix.Rmdir(dirs[i]); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("remove cgroup %s: %w", dirs[i], err)
		}
	}
	return nil
}

// expectedCgroups returns where runc (cgroupfs driver) puts a container
// whose cgroupsPath is p: under each hierarchy's root when p is absolute,
// else under the cgroup of the process that ran it, which is this one.
func expectedCgroups(p string) map[string]string {
	out := map[string]string{}
	if filepath.IsAbs(p) {
		mounts, err := cgroupMounts()
		if err != nil {
			return out
		}
		for h, m := range mounts {
			if h == "" {
				h = "unified"
			}
			out[h] = filepath.Join(m.point, p)
		}
		return out
	}
	own, err := cgroupPaths(os.Getpid(), "")
	if err != nil {
		return out
	}
	for h, dir := range own {
		out[h] = filepath.Join(dir, p)
	}
	return out
}

// killCgroupProcs SIGKILLs every process in the given (container-own)
// cgroups and waits for them to exit, so that the directories can be
// removed. It is for containers whose init was never known: a runtime
// killed half way through start leaves its own init process behind.
func killCgroupProcs(ctx context.Context, paths map[string]string) error {
	var errs []error
	for _, dir := range paths {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			continue // not there: nothing to kill
		}
		for _, f := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(f)
			if err != nil || pid <= 0 {
				continue
			}
			p, err := openProc(pid, 0)
			if err != nil {
				continue // exited meanwhile
			}
			if err := p.signal(unix.SIGKILL); err != nil {
				errs = append(errs, err)
			}
			if _, err := p.wait(ctx); err != nil {
				errs = append(errs, fmt.Errorf("wait for pid %d in %s: %w", pid, dir, err))
			}
			p.close()
		}
	}
	return errors.Join(errs...)
}
