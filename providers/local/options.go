package local

import (
	"log/slog"
	"os"
	"path/filepath"

	"github.com/berth-sh/berth/providers/local/image"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Options configure New. The zero value is the default provider.
type Options struct {
	// StateDir holds images, sandboxes and runtime state; "" is
	// DefaultStateDir().
	StateDir string
	// AgentBinary is the agent binary mounted into every sandbox as its
	// init (cmd/berth-agent, or a berth binary, whose hidden agent verb is
	// the same program); "" is berth-agent beside the running executable,
	// else the running executable itself. A static build (CGO_ENABLED=0)
	// runs as it is; a dynamically linked one runs through the host's
	// dynamic loader and libraries, mounted read-only beside it.
	AgentBinary string
	// Runtime is the OCI runtime binary: "runc" (the default), "crun", or
	// "runsc" (gVisor: a kernel in user space between the sandbox and the
	// host's; see gvisor.go for what it does not support).
	Runtime string
	// Pids is the pids limit of every sandbox; 0 is 1024.
	Pids int64
	// CgroupParent is the cgroup every sandbox's cgroup is made in, relative
	// to the creating process's own (so sandboxes stay inside its limits);
	// "" is "berth".
	CgroupParent string
	// Image configures the image store (insecure registries, platform).
	Image image.Options
	// Pool keeps sandboxes started ahead of Create; the zero value keeps
	// none. See "Pool" in the package doc.
	Pool Pool
	// Logger receives progress (image pulls and seeding) and warnings; nil
	// discards them.
	Logger *slog.Logger
}

// DefaultPids is the pids limit when Options.Pids is 0: room for a build
// or a test suite, not for a fork bomb.
const DefaultPids = 1024

// Environment variables the registry entry reads.
const (
	// EnvStateDir overrides the state directory.
	EnvStateDir = "BERTH_STATE_DIR"
	// EnvAgentBinary names the agent binary to mount into sandboxes.
	EnvAgentBinary = "BERTH_AGENT_BINARY"
	// EnvRuntime names the OCI runtime (Options.Runtime): runc, crun or
	// runsc.
	EnvRuntime = "BERTH_RUNTIME"
)

// DefaultStateDir is /var/lib/berth for root, else $XDG_STATE_HOME/berth
// (~/.local/state/berth).
func DefaultStateDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/berth"
	}
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "berth")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "berth-state")
	}
	return filepath.Join(home, ".local", "state", "berth")
}

// StateDir returns the state directory the provider uses given the value of
// $BERTH_STATE_DIR ("" for unset): the CLI's image verbs open the same
// store as the provider this way.
func StateDir(env string) (string, error) {
	if env == "" {
		return DefaultStateDir(), nil
	}
	if !filepath.IsAbs(env) {
		return "", errdefs.Errorf(errdefs.InvalidArgument, "%s=%q is not an absolute path", EnvStateDir, env)
	}
	return filepath.Clean(env), nil
}

// errNotRoot is the one message for every unprivileged use.
var errNotRoot = errdefs.Errorf(errdefs.Unauthenticated, "the local provider needs root (runc, overlayfs, cgroups); run as root")
