package container

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Names inside Config.Dir.
const (
	upperDir  = "upper"
	workDir   = "work"
	rootfsDir = "rootfs"
	bundleDir = "bundle"
	etcDir    = "etc"
	logFile   = "init.log"
	pidFile   = "init.pid"
	stateFile = "container.json"
)

// etcFiles are generated per container and bind-mounted over the image's.
var etcFiles = []string{"hosts", "hostname", "resolv.conf"}

// Timeouts of Delete's steps, each on a context that ignores the caller's
// cancellation: a process in uninterruptible sleep or a stuck runtime must
// not hang teardown forever, and one slow step must not starve the next.
const (
	killTimeout    = 10 * time.Second
	runtimeTimeout = 30 * time.Second
)

// Container is a running container. Its methods are safe for concurrent use.
type Container struct {
	rt      Runtime
	bin     string
	id      string
	dir     string
	pid     int
	start   uint64            // start time of pid, see procStartTime
	cgroups map[string]string // hierarchy -> host dir
	cgPath  string            // the spec's cgroupsPath

	proc  *proc  // nil when the init was already gone at Load
	slirp *slirp // nil unless started by this process

	blank bool // made for SwitchRoot (Config.Blank)
	disk  bool // upper and work directories on a disk of their own (Config.DiskBytes)

	mu       sync.Mutex
	deleted  bool
	switched bool // SwitchRoot gave it its root
}

// Create makes and starts a container. On error nothing it made is left:
// no mount, directory, cgroup, process or runtime state.
func (r Runtime) Create(ctx context.Context, c Config) (*Container, error) {
	return r.create(ctx, c, true)
}

// Prepare is Create without starting Init (`runtime create`): namespaces,
// mounts, cgroups, slirp4netns and the runtime's init process exist, and
// that process waits to exec Init until Start. Limits can be changed
// before Start with SetLimits. Delete removes a prepared container as any.
func (r Runtime) Prepare(ctx context.Context, c Config) (*Container, error) {
	return r.create(ctx, c, false)
}

func (r Runtime) create(ctx context.Context, c Config, start bool) (*Container, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	bin, err := r.binary()
	if err != nil {
		return nil, err
	}
	if isGVisor(bin) {
		if err := checkGVisor(&c); err != nil {
			return nil, err
		}
	}
	if err := checkRoot(); err != nil {
		return nil, err
	}
	sec, err := r.Seccomp.profile()
	if err != nil {
		return nil, err
	}
	var slirpBin string
	if c.Network == NetworkPublic {
		if slirpBin, err = lookSlirp(r.Slirp); err != nil {
			return nil, err
		}
	}
	if r.stateExists(c.ID) {
		return nil, errdefs.Errorf(errdefs.AlreadyExists, "container %s exists in %s", c.ID, r.root())
	}
	// An exclusive mkdir makes the directory ours: from here on a failure
	// tears down everything under it, and nothing of another container.
	if err := os.MkdirAll(filepath.Dir(c.Dir), 0o700); err != nil {
		return nil, fmt.Errorf("create container dir: %w", err)
	}
	if err := os.Mkdir(c.Dir, 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, errdefs.Errorf(errdefs.AlreadyExists, "container dir %s exists", c.Dir)
		}
		return nil, fmt.Errorf("create container dir: %w", err)
	}
	ct := &Container{rt: r, bin: bin, id: c.ID, dir: c.Dir}
	if err := ct.setup(ctx, &c, sec, slirpBin, start); err != nil {
		derr := ct.Delete(context.WithoutCancel(ctx))
		return nil, errors.Join(fmt.Errorf("create container %s: %w", c.ID, err), derr)
	}
	return ct, nil
}

func (ct *Container) path(name string) string { return filepath.Join(ct.dir, name) }

// rw is the path of something the container writes (an overlay's upper
// or work directory, the /etc files): on the container's disk when it has
// one.
func (ct *Container) rw(name string) string {
	if ct.disk {
		return filepath.Join(ct.dir, diskDir, name)
	}
	return ct.path(name)
}

// makeRoot makes what the runtime is given: the disk of a disk limit, the
// directories, the overlay and the /etc files.
func (ct *Container) makeRoot(ctx context.Context, c *Config) error {
	if c.DiskBytes > 0 {
		ct.disk = true
		if err := makeDisk(ctx, ct.path(diskImage), ct.path(diskDir), c.DiskBytes); err != nil {
			return err
		}
	}
	// The /etc files are writable bind mounts (tasks edit /etc/hosts):
	// on the disk, when there is one, so that what a sandbox appends to
	// them counts against its limit like any other write.
	dirs := []string{ct.rw(upperDir), ct.rw(workDir), ct.path(rootfsDir), ct.path(bundleDir), ct.rw(etcDir)}
	if c.Blank {
		dirs = append(dirs, ct.rw(rootUpperDir), ct.rw(rootWorkDir), ct.path(rootDir))
		ct.blank = true
	}
	for _, d := range dirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	if err := mountOverlay(c.LowerDirs, ct.rw(upperDir), ct.rw(workDir), ct.path(rootfsDir)); err != nil {
		return err
	}
	return writeEtc(ct.rw(etcDir), c)
}

func (ct *Container) setup(ctx context.Context, c *Config, sec *specs.LinuxSeccomp, slirpBin string, start bool) error {
	if err := ct.makeRoot(ctx, c); err != nil {
		return err
	}
	cgroupsPath := path.Join(ct.rt.cgroupParent(), c.ID)
	ct.cgPath = cgroupsPath
	spec := buildSpec(c, ct.path(rootfsDir), ct.rw(etcDir), cgroupsPath, sec)
	b, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(ct.path(bundleDir), "config.json"), b, 0o600); err != nil {
		return err
	}

	log, err := os.OpenFile(ct.path(logFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	extra := append([]*os.File(nil), c.ExtraFiles...)
	var exitR *os.File
	if slirpBin != "" {
		// The write end goes to the container only; see startSlirp.
		r, w, err := os.Pipe()
		if err != nil {
			return err
		}
		defer r.Close()
		defer w.Close()
		exitR = r
		extra = append(extra, w)
	}

	args := []string{"create", "--bundle", ct.path(bundleDir), "--pid-file", ct.path(pidFile)}
	if start {
		args = append([]string{"run", "--detach"}, args[1:]...)
	}
	if len(extra) > 0 {
		args = append(args, "--preserve-fds", strconv.Itoa(len(extra)))
	}
	cmd := ct.rt.command(ctx, ct.bin, append(args, c.ID)...)
	// The init inherits these: /dev/null and a file, never pipes, or the
	// runtime's exit would leave us waiting on a pipe the init holds open.
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = log, log
	cmd.ExtraFiles = extra
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", filepath.Base(ct.bin), args[0], err, fileTail(ct.path(logFile)))
	}
	if err := ct.openInit(); err != nil {
		return err
	}
	if ct.cgroups, err = cgroupPaths(ct.pid, cgroupsPath); err != nil {
		return err
	}
	if slirpBin != "" {
		if exitR == nil {
			return errors.New("internal: no slirp exit pipe")
		}
		if ct.slirp, err = startSlirp(ctx, slirpBin, ct.pid, exitR, log); err != nil {
			return err
		}
	}
	return ct.save()
}

// openInit reads the init's pid from the pid file and opens a pidfd on it.
func (ct *Container) openInit() error {
	b, err := os.ReadFile(ct.path(pidFile))
	if err != nil {
		return fmt.Errorf("read init pid: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return fmt.Errorf("bad init pid %q", b)
	}
	ct.pid = pid
	if ct.proc, err = openProc(pid, 0); err != nil {
		return fmt.Errorf("init of %s: %w", ct.id, err)
	}
	if ct.start, err = procStartTime(pid); err != nil {
		return fmt.Errorf("init of %s: %w", ct.id, err)
	}
	return nil
}

func writeEtc(dir string, c *Config) error {
	hostname := c.Hostname
	if hostname == "" {
		hostname = c.ID
		if len(hostname) > 63 {
			hostname = hostname[:63]
		}
	}
	resolv := "# no network\n"
	if c.Network == NetworkPublic {
		resolv = "nameserver " + slirpDNS + "\n"
	}
	files := map[string]string{
		"hostname":    hostname + "\n",
		"hosts":       "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t" + hostname + "\n",
		"resolv.conf": resolv,
	}
	for _, name := range etcFiles {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(files[name]), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ID returns the container's ID.
func (ct *Container) ID() string { return ct.id }

// Pid returns the host pid of the container's init.
func (ct *Container) Pid() int { return ct.pid }

// Dir returns the per-container directory.
func (ct *Container) Dir() string { return ct.dir }

// Rootfs returns the host path of the container's root filesystem (the
// overlay mount; SwitchRoot's once it ran). Writing through it from the
// host follows symlinks the container planted: use it only for trusted,
// read-mostly work.
func (ct *Container) Rootfs() string { return ct.rootPath(rootfsDir, rootDir) }

// UpperDir returns the host path of the overlay's upper directory, which
// holds what the container wrote.
func (ct *Container) UpperDir() string {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.switched {
		return ct.rw(rootUpperDir)
	}
	return ct.rw(upperDir)
}

// rootPath is the path of name, or of switched once SwitchRoot ran.
func (ct *Container) rootPath(name, switched string) string {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.switched {
		return ct.path(switched)
	}
	return ct.path(name)
}

// LogPath returns the file the init's stdout and stderr go to.
func (ct *Container) LogPath() string { return ct.path(logFile) }

// CgroupPaths returns the host directories of the container's cgroups, by
// hierarchy ("memory", "cpu", "pids", ... or "unified" for cgroup2).
func (ct *Container) CgroupPaths() map[string]string {
	out := make(map[string]string, len(ct.cgroups))
	for k, v := range ct.cgroups {
		out[k] = v
	}
	return out
}

// Kill sends sig to the container's init. Killing an init with SIGKILL kills
// every process of the container. A container that has exited is not an
// error.
func (ct *Container) Kill(ctx context.Context, sig unix.Signal) error {
	ct.mu.Lock()
	deleted := ct.deleted
	ct.mu.Unlock()
	if deleted {
		return errdefs.Errorf(errdefs.NotFound, "container %s: %w", ct.id, errDeleted)
	}
	if ct.proc == nil {
		return nil
	}
	return ct.proc.signal(sig)
}

// Wait blocks until the init has exited or ctx is done. It returns the
// init's exit status (128+n for signal n) when this process reaped it, and
// -1 when the init was not its child (see SetSubreaper).
func (ct *Container) Wait(ctx context.Context) (int, error) {
	if ct.proc == nil {
		return -1, nil
	}
	return ct.proc.wait(ctx)
}

// Delete kills the container and removes everything it had: runtime state,
// slirp4netns, the overlay mount, its cgroups and its directory. It runs to
// the end even when ctx is cancelled, can be called again after an error
// (or after success: then it does nothing), and joins the errors of the
// steps.
func (ct *Container) Delete(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.deleted {
		return nil
	}
	var errs []error
	dead := true
	if ct.proc != nil {
		if err := ct.proc.signal(unix.SIGKILL); err != nil {
			errs = append(errs, err)
		}
		wctx, cancel := context.WithTimeout(ctx, killTimeout)
		_, err := ct.proc.wait(wctx)
		cancel()
		if err != nil {
			dead = false
			errs = append(errs, fmt.Errorf("wait for init %d: %w (an unreaped zombie in the container? see SetSubreaper)", ct.pid, err))
		}
	}
	if ct.rt.stateExists(ct.id) {
		args := []string{"delete"}
		if !dead || ct.proc == nil {
			args = append(args, "--force") // slow, but the init may live
		}
		rctx, cancel := context.WithTimeout(ctx, runtimeTimeout)
		err := ct.rt.run(rctx, ct.bin, append(args, ct.id)...)
		cancel()
		if err != nil && ct.rt.stateExists(ct.id) {
			errs = append(errs, err)
		}
	}
	if !dead && !ct.proc.exited() {
		// Still running: keep its files and mounts for a later retry.
		return fmt.Errorf("delete container %s: %w", ct.id, errors.Join(errs...))
	}
	if err := ct.slirp.stop(); err != nil {
		errs = append(errs, err)
	}
	// SwitchRoot's overlay, if any, then Create's, then the disk under
	// both (its loop device clears itself with the unmount).
	mountErr := unmountAll(ct.dir)
	if mountErr != nil {
		errs = append(errs, mountErr)
	}
	cgroups := ct.cgroups
	if cgroups == nil && ct.cgPath != "" {
		// The runtime failed or was killed before the init's cgroups were
		// read: remove where it would have put them.
		cgroups = expectedCgroups(ct.cgPath)
	}
	if ct.proc == nil || isGVisor(ct.bin) {
		// No handle on the init (a start killed half way, or a Load
		// of an exited one), or runsc's gofer, which outlives the
		// sandbox process a moment: whatever is still in its cgroups
		// goes.
		kctx, cancel := context.WithTimeout(ctx, killTimeout)
		err := killCgroupProcs(kctx, cgroups)
		cancel()
		if err != nil {
			errs = append(errs, err)
		}
	}
	if err := removeCgroups(cgroups); err != nil {
		errs = append(errs, err)
	}
	// Never remove the directory while the overlay may be mounted: that
	// would walk into the container's files.
	if mountErr == nil {
		if err := os.RemoveAll(ct.dir); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", ct.dir, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("delete container %s: %w", ct.id, errors.Join(errs...))
	}
	if ct.proc != nil {
		ct.proc.close()
	}
	ct.deleted = true
	return nil
}
