package registry

import (
	"context"
	"log/slog"
	"time"

	"github.com/berth-sh/berth/sandbox/driver"
)

// Entry describes one provider as data.
type Entry struct {
	// Name is the registry name ("local", "e2b"). Lower case.
	Name string
	// Aliases resolve to this entry ("agentenv" -> "e2b").
	Aliases []string
	// Summary is one line for `berth providers`.
	Summary string
	// Credential is the provider's credential; the zero value means none is
	// needed (local).
	Credential Credential
	// Forward lists address and selector variables that are safe to forward
	// to workers by value. A value containing '@' is refused.
	Forward []string
	// EnvDefaults are runtime selectors forwarded with a default unless the
	// user set them (MODAL_SANDBOX_V2=1).
	EnvDefaults []Var
	// Target is echoed at launch so the user sees which endpoint is used.
	Target *Target
	// Library names the client library the driver is built on and the
	// oldest version that works, for the fail-fast check and for docs.
	Library, MinVersion string
	// Requires lists the host pieces the provider needs (binaries, root).
	Requires []Requirement
	// Probe, when set, is the endpoint `berth doctor` checks for reachability.
	Probe *Probe
	// Capabilities reports what the provider supports, readable without
	// opening it. It is the driver package's own function (the one its
	// driver's Capabilities method returns, derived from the driver's
	// interfaces by driver.Derive), never a literal: an entry cannot claim
	// what the driver does not do. Required.
	Capabilities func() driver.Capabilities
	// Limits are the provider's create limits (in flight, rate, live
	// sandboxes, retries) that runners respect; users may override them.
	Limits driver.Limits
	// TTLMargin is how long a runner lets a sandbox outlive its trial's own
	// time limits (Daytona: 30 minutes, so auto-stop never lands mid-trial).
	TTLMargin time.Duration
	// DefaultImage is the image (or template) a task that names none runs
	// on, e.g. the smoke runner's built-in task: a shell is all it needs.
	DefaultImage string
	// Open builds the driver from a resolved configuration.
	Open Factory
}

// DefaultPublicImage is the DefaultImage of the entries whose providers
// pull public images (Daytona, Modal, Kubernetes), and of berth serve's
// template "base" where the provider's entry names none: a small Debian,
// with the bash and coreutils that the E2B SDKs (every command is
// /bin/bash -l -c) and the drivers' exec wrappers need.
const DefaultPublicImage = "debian:bookworm-slim"

// Factory opens a provider's driver. It is called after the worker-side
// credential has been resolved.
type Factory func(ctx context.Context, cfg Config) (driver.Provider, error)

// Config is what a Factory gets.
type Config struct {
	// Name is the canonical registry name.
	Name string
	// Secrets holds the resolved credential, keyed by the entry's key
	// variable names (E2B_API_KEY; MODAL_TOKEN_ID and MODAL_TOKEN_SECRET).
	// Empty for providers without a credential.
	Secrets map[string]Secret
	// Env reads the worker's environment (forwarded addresses, selectors,
	// defaults already applied).
	Env Environ
	// Logger receives the driver's logs; never nil.
	Logger *slog.Logger
}

// Credential describes how a provider's secret is supplied and resolved.
type Credential struct {
	// KeyVars are the environment variables a worker must ALL have for the
	// environment path. Modal's credential is a pair.
	KeyVars []string
	// FileVar is the path-valued variable forwarded instead of the secret.
	FileVar string
	// DefaultPath is where the key file lives when no path is given; a
	// leading "~/" means the home directory.
	DefaultPath string
	// Flag is the launcher flag that names an explicit key-file path.
	Flag string
	// ProvisionHint is the one command that provisions the file, shown in
	// every "missing" error.
	ProvisionHint string
	// ParseFile turns the key file's bytes into values keyed by KeyVars.
	// Nil means the trimmed contents are the single key.
	ParseFile func(data []byte, env Environ) (map[string]string, error)
}

// None reports whether the provider needs no credential.
func (c Credential) None() bool { return len(c.KeyVars) == 0 }

// Var is one environment variable.
type Var struct {
	Name, Value string
}

// Target is (variable, label, default description): "<provider> <label>:
// <value or default>".
type Target struct {
	Var, Label, Default string
}

// Requirement is a host piece a provider needs.
type Requirement struct {
	// Binary is a program looked up in PATH; "" for non-binary requirements.
	Binary string
	// Root requires running as root.
	Root bool
	// Hint says how to get it ("apt-get install runc").
	Hint string
}

// Probe is an HTTP endpoint checked by `berth doctor`: any HTTP answer below
// 500, 401 included, counts as reachable.
type Probe struct {
	// URLVar is the variable holding the base URL (E2B_API_URL).
	URLVar string
	// Default is used when URLVar is unset.
	Default string
	// Path is appended to the base URL ("/health").
	Path string
}
