package driver

import (
	"github.com/berth-sh/berth/sandbox/errdefs"
	"maps"
	"strings"
	"time"
)

// Spec describes the sandbox to create. The zero value of every field means
// "the provider's default"; Validate rejects what no provider can honour.
type Spec struct {
	// Image is a registry reference ("debian:bookworm-slim",
	// "ghcr.io/org/img@sha256:..."), or for providers with templates, a
	// template name. Exactly one of Image and Build is set.
	Image string
	// Build asks the provider to build the image from a context directory.
	Build *Build

	Resources Resources
	// Env is set in every command run in the sandbox; Command.Env wins.
	Env map[string]string
	// WorkDir is the default working directory of commands.
	WorkDir string
	// User runs commands as this user unless Command.User says otherwise.
	User string
	// Labels mark ownership (job, trial, launcher) and drive List and reaping.
	// Keys and values are short printable strings; never put secrets here.
	Labels map[string]string
	// TTL is how long the sandbox lives unless SetTimeout moves the deadline.
	// It is enforced on the provider side so that a crashed caller cannot leak
	// the sandbox. Zero means DefaultTTL.
	TTL time.Duration
	// Network is the egress policy; the zero value is NetworkNone.
	Network Network
	// Ports the sandbox will serve, for Endpoint. Providers whose
	// Capabilities.PortsAtCreate is set (Modal) expose only these; the
	// others expose any port later and only check the protocols here
	// against Capabilities.Ports.
	Ports []Port
	// Pull, when set, guards the pulls of Image (or of a Build's base) for
	// a remote client that named it: see PullPolicy. nil leaves them as
	// the operator's own runs have them.
	Pull *PullPolicy
}

// Build is an image built from a Dockerfile in a context directory.
type Build struct {
	ContextDir string // host directory sent as the build context
	Dockerfile string // path relative to ContextDir; "" means "Dockerfile"
	// Args override the defaults of the Dockerfile's ARG instructions.
	Args map[string]string
}

// Resources are the compute a sandbox asks for. Providers state whether they
// treat them as requests or limits in Capabilities.ResourceMode; a Spec that
// sets Limits asks for hard limits where the provider can do both.
type Resources struct {
	CPUs      float64 // cores; may be fractional
	MemoryMB  int
	StorageMB int
	GPUs      int
	// PIDs caps the processes and threads alive in the sandbox at once,
	// where the provider has such a limit; zero is the provider's default.
	PIDs   int64
	Limits bool // enforce as limits rather than requests
}

// NetworkMode is the egress policy of a sandbox.
type NetworkMode string

// Network modes. Loopback inside the sandbox always works.
const (
	NetworkNone      NetworkMode = "none"      // no egress at all
	NetworkPublic    NetworkMode = "public"    // the internet, never the host
	NetworkAllowlist NetworkMode = "allowlist" // only Network.Allow
)

// Network is the network policy of a sandbox.
type Network struct {
	Mode  NetworkMode
	Allow []string // hosts or CIDRs, for NetworkAllowlist
}

// DefaultTTL is the TTL of a sandbox whose Spec leaves it zero: long enough for
// a typical agent trial, short enough that a leak costs little.
const DefaultTTL = time.Hour

// Bounds on labels, kept to what every provider accepts as tags or metadata.
const (
	maxLabels      = 64
	maxLabelKeyLen = 63
	maxLabelValLen = 256
)

// Validate reports the first problem that makes the Spec impossible to honour
// on any provider, as an InvalidArgument error.
func (s *Spec) Validate() error {
	switch {
	case s.Image == "" && s.Build == nil:
		return errdefs.Errorf(errdefs.InvalidArgument, "spec: an image or a build is required")
	case s.Image != "" && s.Build != nil:
		return errdefs.Errorf(errdefs.InvalidArgument, "spec: image %q and a build are both set; choose one", s.Image)
	case s.Build != nil && s.Build.ContextDir == "":
		return errdefs.Errorf(errdefs.InvalidArgument, "spec: build needs a context directory")
	case s.Resources.CPUs < 0, s.Resources.MemoryMB < 0, s.Resources.StorageMB < 0, s.Resources.GPUs < 0, s.Resources.PIDs < 0:
		return errdefs.Errorf(errdefs.InvalidArgument, "spec: resources must not be negative (%+v)", s.Resources)
	case s.TTL < 0:
		return errdefs.Errorf(errdefs.InvalidArgument, "spec: ttl %v is negative", s.TTL)
	}
	switch s.Network.Mode {
	case "", NetworkNone, NetworkPublic:
	case NetworkAllowlist:
		if len(s.Network.Allow) == 0 {
			return errdefs.Errorf(errdefs.InvalidArgument, "spec: network allowlist is empty")
		}
	default:
		return errdefs.Errorf(errdefs.InvalidArgument, "spec: network mode %q is not one of none, public, allowlist", s.Network.Mode)
	}
	if err := ValidateLabels(s.Labels); err != nil {
		return err
	}
	if err := validatePorts(s.Ports); err != nil {
		return err
	}
	if err := s.Pull.Validate(); err != nil {
		return err
	}
	for k := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return errdefs.Errorf(errdefs.InvalidArgument, "spec: environment variable name %q is invalid", k)
		}
	}
	return nil
}

// ValidateLabels checks label keys and values against the limits every
// provider accepts.
func ValidateLabels(labels map[string]string) error {
	if len(labels) > maxLabels {
		return errdefs.Errorf(errdefs.InvalidArgument, "labels: %d labels, at most %d", len(labels), maxLabels)
	}
	for k, v := range labels {
		if k == "" || len(k) > maxLabelKeyLen || !printable(k) || strings.ContainsAny(k, "=,&") {
			return errdefs.Errorf(errdefs.InvalidArgument, "labels: key %q must be 1-%d printable characters without '=', ',' or '&'", k, maxLabelKeyLen)
		}
		if len(v) > maxLabelValLen || !printable(v) {
			return errdefs.Errorf(errdefs.InvalidArgument, "labels: value of %q must be at most %d printable characters", k, maxLabelValLen)
		}
	}
	return nil
}

func printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// WithDefaults returns a copy of s with defaults filled in; maps are copied so
// the driver may not alias the caller's.
func (s Spec) WithDefaults() Spec {
	if s.TTL == 0 {
		s.TTL = DefaultTTL
	}
	if s.Network.Mode == "" {
		s.Network.Mode = NetworkNone
	}
	s.Env = maps.Clone(s.Env)
	s.Labels = maps.Clone(s.Labels)
	s.Network.Allow = append([]string(nil), s.Network.Allow...)
	var ports []Port
	for _, p := range s.Ports {
		ports = append(ports, p.WithDefaults())
	}
	s.Ports = ports
	s.Pull = s.Pull.Clone()
	return s
}

// ParseLabel parses "key=value" as used on command lines.
func ParseLabel(kv string) (key, value string, err error) {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || k == "" {
		return "", "", errdefs.Errorf(errdefs.InvalidArgument, "label %q is not key=value", kv)
	}
	return k, v, nil
}

// MatchLabels reports whether have carries every key=value of want.
func MatchLabels(have, want map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

func (m NetworkMode) String() string { return string(m) }
