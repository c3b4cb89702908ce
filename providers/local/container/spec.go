package container

import (
	"os"
	"path"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// ociVersion is the newest spec version every supported runtime accepts
// (runc 1.1 reports 1.0.2-dev); the fields used here all exist in it.
const ociVersion = "1.0.2"

// defaultCaps is Docker's default set without CAP_NET_RAW (no raw sockets:
// no spoofing through slirp) and CAP_MKNOD (devices are fixed at create).
// Left out, among others: SYS_ADMIN, NET_ADMIN, SYS_PTRACE, SYS_MODULE,
// SYS_RAWIO, SYS_TIME, SYS_BOOT, DAC_READ_SEARCH, LINUX_IMMUTABLE, BPF.
var defaultCaps = []string{
	"CAP_CHOWN",
	"CAP_DAC_OVERRIDE",
	"CAP_FOWNER",
	"CAP_FSETID",
	"CAP_KILL",
	"CAP_SETGID",
	"CAP_SETUID",
	"CAP_SETPCAP",
	"CAP_SETFCAP",
	"CAP_NET_BIND_SERVICE",
	"CAP_SYS_CHROOT",
	"CAP_AUDIT_WRITE",
}

// Docker's masked and read-only paths.
var (
	maskedPaths = []string{
		"/proc/acpi", "/proc/asound", "/proc/interrupts", "/proc/kcore",
		"/proc/keys", "/proc/latency_stats", "/proc/sched_debug", "/proc/scsi",
		"/proc/timer_list", "/proc/timer_stats", "/sys/devices/virtual/powercap",
		"/sys/firmware",
	}
	readonlyPaths = []string{
		"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
	}
)

const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// ptr returns a pointer to v, for the optional fields of runtime-spec.
func ptr[T any](v T) *T { return &v }

// charDev is a character device node created in the container's /dev and
// allowed by its device cgroup.
func charDev(p string, major, minor int64) specs.LinuxDevice {
	return specs.LinuxDevice{
		Path: p, Type: "c", Major: major, Minor: minor,
		FileMode: ptr(os.FileMode(0o666)), UID: ptr(uint32(0)), GID: ptr(uint32(0)),
	}
}

var devices = []specs.LinuxDevice{
	charDev("/dev/null", 1, 3),
	charDev("/dev/zero", 1, 5),
	charDev("/dev/full", 1, 7),
	charDev("/dev/random", 1, 8),
	charDev("/dev/urandom", 1, 9),
	charDev("/dev/tty", 5, 0),
}

// deviceRules deny every device, then allow the nodes above, /dev/ptmx and
// the pty slaves.
func deviceRules() []specs.LinuxDeviceCgroup {
	rules := []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}}
	for _, d := range devices {
		rules = append(rules, specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: ptr(d.Major), Minor: ptr(d.Minor), Access: "rwm"})
	}
	return append(rules,
		specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: ptr(int64(5)), Minor: ptr(int64(2)), Access: "rwm"}, // ptmx
		specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: ptr(int64(136)), Access: "rwm"},                     // pts
	)
}

// buildSpec returns the OCI config of c. rootfs is the host path of the
// mounted overlay; etc holds the generated hosts, hostname and resolv.conf.
// seccomp is the filter to install, nil for none.
func buildSpec(c *Config, rootfs, etc, cgroupsPath string, seccomp *specs.LinuxSeccomp) *specs.Spec {
	env := append([]string(nil), c.Env...)
	if !hasEnv(env, "PATH") {
		env = append(env, defaultPath)
	}
	cwd := c.Cwd
	if cwd == "" {
		cwd = "/"
	}
	hostname := c.Hostname
	if hostname == "" {
		hostname = c.ID
		if len(hostname) > 63 {
			hostname = hostname[:63]
		}
	}
	caps := append([]string(nil), defaultCaps...)
	s := &specs.Spec{
		Version: ociVersion,
		Process: &specs.Process{
			Args: append([]string(nil), c.Init...),
			Env:  env,
			Cwd:  cwd,
			User: specs.User{UID: c.User.UID, GID: c.User.GID, AdditionalGids: c.User.AdditionalGIDs},
			Capabilities: &specs.LinuxCapabilities{
				Bounding: caps, Effective: caps, Permitted: caps,
			},
			// No rlimits: raising one needs CAP_SYS_RESOURCE, which some
			// hosts (this project's CI VMs) do not grant even to root; the
			// init inherits the caller's.
			NoNewPrivileges: true,
		},
		Root:     &specs.Root{Path: rootfs},
		Hostname: hostname,
		Mounts:   mounts(c, etc),
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace},
				{Type: specs.MountNamespace},
				{Type: specs.UTSNamespace},
				{Type: specs.IPCNamespace},
				{Type: specs.NetworkNamespace},
				{Type: specs.CgroupNamespace},
			},
			CgroupsPath:   cgroupsPath,
			Resources:     resources(c.Limits),
			Devices:       append([]specs.LinuxDevice(nil), devices...),
			MaskedPaths:   append([]string(nil), maskedPaths...),
			ReadonlyPaths: append([]string(nil), readonlyPaths...),
			Seccomp:       seccomp,
		},
	}
	return s
}

func hasEnv(env []string, key string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, key+"=") {
			return true
		}
	}
	return false
}

func resources(l Limits) *specs.LinuxResources {
	r := &specs.LinuxResources{Devices: deviceRules()}
	if l.CPUs > 0 {
		r.CPU = &specs.LinuxCPU{Quota: ptr(int64(l.CPUs * cpuPeriod)), Period: ptr(uint64(cpuPeriod))}
	}
	if l.MemoryBytes > 0 {
		// Swap is memory+swap in the spec: equal to the limit means no swap.
		r.Memory = &specs.LinuxMemory{Limit: ptr(l.MemoryBytes), Swap: ptr(l.MemoryBytes)}
	}
	if l.Pids > 0 {
		r.Pids = &specs.LinuxPids{Limit: ptr(l.Pids)}
	}
	return r
}

func mounts(c *Config, etc string) []specs.Mount {
	ms := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
	}
	for _, f := range etcFiles {
		ms = append(ms, specs.Mount{
			Destination: path.Join("/etc", f), Type: "bind", Source: path.Join(etc, f),
			Options: []string{"rbind", "rprivate", "nosuid", "nodev", "noexec"},
		})
	}
	all := c.Mounts
	if c.InitBinary != "" {
		all = append([]Mount{{Source: c.InitBinary, Target: c.Init[0], ReadOnly: true}}, all...)
	}
	for _, m := range all {
		opts := []string{"rbind", "rprivate", "nosuid", "nodev"}
		if m.ReadOnly {
			opts = append(opts, "ro")
		}
		ms = append(ms, specs.Mount{Destination: path.Clean(m.Target), Type: "bind", Source: m.Source, Options: opts})
	}
	return ms
}
