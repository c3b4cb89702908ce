package container

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Runtime is an OCI runtime binary and where it keeps its state. The zero
// value uses runc from PATH with state under /run/berth/runc and cgroups
// under berth/ relative to this process's own cgroup.
type Runtime struct {
	// Binary is "runc" (the default), "crun", "runsc", or a path to one.
	Binary string
	// Root is the runtime's --root state directory.
	Root string
	// CgroupParent is the parent of every container's cgroup. A relative
	// path is taken by runc (cgroupfs driver) under the cgroup of the
	// process that runs it, so containers stay inside this process's own
	// limits; an absolute one starts at each hierarchy's root.
	CgroupParent string
	// Slirp is the slirp4netns binary for NetworkPublic; "" finds it in PATH.
	Slirp string
	// Seccomp is the seccomp filter of every container; the zero value is
	// SeccompDefault.
	Seccomp Seccomp
}

// Defaults of Runtime's fields.
const (
	DefaultRoot         = "/run/berth/runc"
	DefaultCgroupParent = "berth"
)

func (r Runtime) root() string {
	if r.Root == "" {
		return DefaultRoot
	}
	return r.Root
}

func (r Runtime) cgroupParent() string {
	if r.CgroupParent == "" {
		return DefaultCgroupParent
	}
	return r.CgroupParent
}

// binary finds the runtime executable; a missing one says how to install it.
func (r Runtime) binary() (string, error) {
	name := r.Binary
	if name == "" {
		name = "runc"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		hint := "apt-get install " + filepath.Base(name)
		if filepath.Base(name) == "runsc" {
			hint = "see gvisor.dev for gVisor's runsc"
		}
		return "", errdefs.Errorf(errdefs.NotSupported, "OCI runtime %q not found (%w); install it with: %s", name, err, hint)
	}
	return p, nil
}

// checkRoot refuses to go on without root: namespaces, overlay mounts and
// cgroups all need it.
func checkRoot() error {
	if euid := geteuid(); euid != 0 {
		return errdefs.Errorf(errdefs.Unauthenticated, "containers need root (euid is %d): run berth as root, e.g. with sudo", euid)
	}
	return nil
}

// geteuid is a variable so that tests run as root can see the non-root path.
var geteuid = os.Geteuid

// command runs the runtime with its global flags; output goes to out.
func (r Runtime) command(ctx context.Context, bin string, args ...string) *exec.Cmd {
	all := []string{"--root", r.root()}
	if isGVisor(bin) {
		// No network but loopback (berth's network none; gVisor's own
		// netstack would need an interface set up for it), and unix
		// sockets the sandbox creates in a bind-mounted host directory
		// are real host sockets: the agent's (no fds pass into runsc).
		all = append(all, "--network=none", "--host-uds=create")
	}
	return exec.CommandContext(ctx, bin, append(all, args...)...)
}

// isGVisor reports whether the runtime binary is gVisor's runsc.
func isGVisor(bin string) bool { return filepath.Base(bin) == "runsc" }

// IsGVisor reports whether r runs containers under gVisor (runsc), whose
// containers take no inherited fds, no network but loopback, and no
// SwitchRoot or KillAllButInit (the sandbox's processes are the user
// space kernel's, not the host's).
func (r Runtime) IsGVisor() bool { return isGVisor(r.Binary) }

// checkGVisor refuses what runsc cannot do.
func checkGVisor(c *Config) error {
	switch {
	case len(c.ExtraFiles) > 0:
		return errdefs.Errorf(errdefs.NotSupported, "container %s: runsc cannot pass file descriptors (ExtraFiles); pass a socket directory as a mount", c.ID)
	case c.Network != NetworkNone:
		return errdefs.Errorf(errdefs.NotSupported, "container %s: network %q under runsc: only none is supported", c.ID, c.Network)
	case c.Blank:
		return errdefs.Errorf(errdefs.NotSupported, "container %s: a blank root (SwitchRoot) under runsc is not supported", c.ID)
	}
	return nil
}

// run runs a short runtime command and returns its combined output in the
// error when it fails.
func (r Runtime) run(ctx context.Context, bin string, args ...string) error {
	cmd := r.command(ctx, bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", filepath.Base(bin), strings.Join(args, " "), err, tail(out.Bytes()))
	}
	return nil
}

// stateExists reports whether the runtime still has state for id.
func (r Runtime) stateExists(id string) bool {
	_, err := os.Stat(filepath.Join(r.root(), id))
	return err == nil
}

// tail returns the end of a runtime's output, trimmed, for error messages.
func tail(b []byte) string {
	const max = 2048
	b = bytes.TrimSpace(b)
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// fileTail reads at most the last 2 KiB of a log file.
func fileTail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const max = 2048
	if fi, err := f.Stat(); err == nil && fi.Size() > max {
		_, _ = f.Seek(fi.Size()-max, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, max))
	return tail(b)
}

var errDeleted = errors.New("container deleted")
