package container

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Config describes one container. Paths are host paths unless named
// otherwise.
type Config struct {
	// ID names the container for the runtime and its cgroup: 1-64 of
	// [A-Za-z0-9_.-], not starting with a dot or dash.
	ID string
	// LowerDirs are the image's unpacked layers, lowest first. They are only
	// read; many containers may share them.
	LowerDirs []string
	// Dir is the per-container directory. Create makes it (it must not exist
	// or be empty) and Delete removes it.
	Dir string
	// Init is the argv of PID 1, resolved inside the container.
	Init []string
	// InitBinary, when set, is a host file bind-mounted read-only at
	// Init[0] (which must then be absolute), e.g. the berth binary as
	// /.berth/agent: the image need not contain the agent.
	InitBinary string
	// Mounts are extra bind mounts, e.g. the agent binary read-only at
	// /.berth/agent. Their sources must exist.
	Mounts []Mount
	// ExtraFiles are passed to Init as fds 3, 4, ... (e.g. a listening unix
	// socket created on the host, so the container never needs write access
	// to a host directory). Create does not close them.
	ExtraFiles []*os.File
	// Env is the environment of Init, "KEY=value" entries. PATH gets a
	// default when missing.
	Env []string
	// Cwd is the working directory of Init, absolute; "" means "/".
	Cwd string
	// User runs Init as this uid/gid; the zero value is root.
	User User
	// Hostname is the container's hostname; "" means the ID, cut to 63.
	Hostname string
	// Limits are hard cgroup limits; zero fields mean unlimited.
	Limits Limits
	// Network is NetworkNone (the zero value) or NetworkPublic.
	Network Network
	// DiskBytes, when not zero, bounds what the container can write: the
	// overlay's upper and work directories (SwitchRoot's too) and the
	// /etc files mounted over the image's live on an ext4 file system of
	// that size in a sparse file in Dir, mounted through a loop device,
	// and a write past it fails with ENOSPC. At least MinDiskBytes. Zero:
	// they live on Dir's file system.
	DiskBytes int64
	// Blank says that LowerDirs is a blank root (MakeBlankRoot) and that
	// SwitchRoot will give the container its image: Create makes the
	// directories SwitchRoot needs ahead, off its clock (a mkdir costs
	// ~0.4 ms on the CI machine's ext4).
	Blank bool
}

// Mount is a bind mount from the host into the container.
type Mount struct {
	Source   string // host path, file or directory
	Target   string // absolute path inside the container
	ReadOnly bool
}

// User is a numeric identity inside the container.
type User struct {
	UID, GID       uint32
	AdditionalGIDs []uint32
}

// Limits are the resources a container may use.
type Limits struct {
	CPUs        float64 // cores, may be fractional: cpu quota = CPUs * period
	MemoryBytes int64   // memory and memory+swap limit (no swap)
	Pids        int64   // maximum number of tasks
}

// Network is the network of a container.
type Network string

// Network modes.
const (
	// NetworkNone is a new network namespace with loopback only.
	NetworkNone Network = ""
	// NetworkPublic adds a slirp4netns interface with outbound access to the
	// network but not to the host's loopback.
	NetworkPublic Network = "public"
)

// Compiled on first use, not at every berth process's start (the agent's too).
var idPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`) })

// validate checks c before anything is created, so that bad input leaves
// nothing behind.
func (c *Config) validate() error {
	if !idPattern().MatchString(c.ID) {
		return errdefs.Errorf(errdefs.InvalidArgument, "container id %q: want 1-64 of [A-Za-z0-9_.-], not starting with . or -", c.ID)
	}
	if len(c.LowerDirs) == 0 {
		return errdefs.Errorf(errdefs.InvalidArgument, "container %s: no lower dirs (image layers)", c.ID)
	}
	if err := checkLowers(c.LowerDirs); err != nil {
		return err
	}
	if c.Blank {
		if len(c.LowerDirs) != 1 {
			return errdefs.Errorf(errdefs.InvalidArgument, "container %s: a blank container has one lower dir, its blank root", c.ID)
		}
		if err := checkAbsDir("blank root", c.LowerDirs[0]+SwitchPoint); err != nil {
			return err
		}
	}
	if !filepath.IsAbs(c.Dir) {
		return errdefs.Errorf(errdefs.InvalidArgument, "container dir %q is not absolute", c.Dir)
	}
	if strings.ContainsAny(c.Dir, ":,") {
		return errdefs.Errorf(errdefs.InvalidArgument, "container dir %q: ':' and ',' cannot be passed to overlayfs", c.Dir)
	}
	if len(c.Init) == 0 || c.Init[0] == "" {
		return errdefs.Errorf(errdefs.InvalidArgument, "container %s: no init program", c.ID)
	}
	if c.InitBinary != "" {
		if !filepath.IsAbs(c.Init[0]) || filepath.Clean(c.Init[0]) == "/" {
			return errdefs.Errorf(errdefs.InvalidArgument, "init %q: want an absolute path to mount the init binary at", c.Init[0])
		}
		fi, err := os.Stat(c.InitBinary)
		if err != nil {
			return errdefs.Errorf(errdefs.InvalidArgument, "init binary: %w", err)
		}
		if !fi.Mode().IsRegular() {
			return errdefs.Errorf(errdefs.InvalidArgument, "init binary %s is not a regular file", c.InitBinary)
		}
	}
	if c.Cwd != "" && !filepath.IsAbs(c.Cwd) {
		return errdefs.Errorf(errdefs.InvalidArgument, "cwd %q is not absolute", c.Cwd)
	}
	for _, m := range c.Mounts {
		if !filepath.IsAbs(m.Target) || filepath.Clean(m.Target) == "/" {
			return errdefs.Errorf(errdefs.InvalidArgument, "mount target %q: want an absolute path other than /", m.Target)
		}
		if _, err := os.Stat(m.Source); err != nil {
			return errdefs.Errorf(errdefs.InvalidArgument, "mount source: %w", err)
		}
	}
	for _, e := range c.Env {
		if !strings.Contains(e, "=") || strings.HasPrefix(e, "=") {
			return errdefs.Errorf(errdefs.InvalidArgument, "env entry %q: want KEY=value", e)
		}
	}
	if len(c.Hostname) > 63 {
		return errdefs.Errorf(errdefs.InvalidArgument, "hostname %q longer than 63", c.Hostname)
	}
	if c.Network != NetworkNone && c.Network != NetworkPublic {
		return errdefs.Errorf(errdefs.InvalidArgument, "network %q: want none or public", c.Network)
	}
	if c.DiskBytes < 0 || c.DiskBytes > 0 && c.DiskBytes < MinDiskBytes {
		return errdefs.Errorf(errdefs.InvalidArgument, "disk limit of %d bytes: want 0 (none) or at least %d MiB", c.DiskBytes, MinDiskBytes>>20)
	}
	return c.Limits.validate()
}

func (l Limits) validate() error {
	if l.CPUs < 0 || l.MemoryBytes < 0 || l.Pids < 0 {
		return errdefs.Errorf(errdefs.InvalidArgument, "negative limit in %+v", l)
	}
	if n := runtime.NumCPU(); l.CPUs > float64(n) {
		return errdefs.Errorf(errdefs.InvalidArgument, "%g cpus asked, the host has %d", l.CPUs, n)
	}
	if l.CPUs > 0 && l.CPUs*cpuPeriod < 1000 {
		return errdefs.Errorf(errdefs.InvalidArgument, "%g cpus is below the 0.01 minimum", l.CPUs)
	}
	if l.MemoryBytes > 0 {
		if l.MemoryBytes < minMemory {
			return errdefs.Errorf(errdefs.InvalidArgument, "memory %d bytes is below the %d MiB minimum", l.MemoryBytes, minMemory>>20)
		}
		total, err := memTotal()
		if err != nil {
			return err
		}
		if l.MemoryBytes > total {
			return errdefs.Errorf(errdefs.InvalidArgument, "memory %d MiB asked, the host has %d MiB", l.MemoryBytes>>20, total>>20)
		}
	}
	return nil
}

// minMemory is below what any runtime's init needs to start; smaller limits
// would fail later with an obscure OOM.
const minMemory = 6 << 20

// cpuPeriod is the CFS period in microseconds (the kernel default).
const cpuPeriod = 100000

func checkLowers(dirs []string) error {
	for _, d := range dirs {
		if err := checkAbsDir("lower dir", d); err != nil {
			return err
		}
		// overlayfs separates lower dirs with ':' and options with ','.
		if strings.ContainsAny(d, ":,") {
			return errdefs.Errorf(errdefs.InvalidArgument, "lower dir %q: ':' and ',' cannot be passed to overlayfs", d)
		}
	}
	return nil
}

func checkAbsDir(what, p string) error {
	if !filepath.IsAbs(p) {
		return errdefs.Errorf(errdefs.InvalidArgument, "%s %q is not absolute", what, p)
	}
	fi, err := os.Stat(p)
	if err != nil {
		return errdefs.Errorf(errdefs.InvalidArgument, "%s: %w", what, err)
	}
	if !fi.IsDir() {
		return errdefs.Errorf(errdefs.InvalidArgument, "%s %q is not a directory", what, p)
	}
	return nil
}

// memTotal returns the host's MemTotal in bytes.
func memTotal() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("read host memory size: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse MemTotal %q: %w", f[1], err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no MemTotal in /proc/meminfo")
}
