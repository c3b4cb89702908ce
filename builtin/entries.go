package builtin

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/berth-sh/berth/e2bapi"
	daytonaprovider "github.com/berth-sh/berth/providers/daytona"
	e2bprovider "github.com/berth-sh/berth/providers/e2b"
	localprovider "github.com/berth-sh/berth/providers/local"
	modalprovider "github.com/berth-sh/berth/providers/modal"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// The values below are the facts file's table; change them only with it.

func local() registry.Entry {
	return registry.Entry{
		Name:    "local",
		Summary: "sandboxes on this host: OCI images, namespaces and overlayfs; no account, no daemon",
		Requires: []registry.Requirement{
			{Binary: "runc", Hint: "apt-get install runc"},
			{Root: true, Hint: "run berth as root"},
		},
		Capabilities: localprovider.ProviderCapabilities,
		// Seeded offline from the host's busybox-static on first use.
		DefaultImage: localprovider.DefaultImage,
		Open:         openLocal,
	}
}

// localPoolSize is the local provider's default pool (BERTH_POOL_SIZE):
// sandboxes kept started ahead, of no image yet, so that create to first
// exec of any image takes ~6 ms instead of runc's ~30. 0 turns it off.
const localPoolSize = 2

// openLocal opens the local driver on $BERTH_STATE_DIR (default
// /var/lib/berth), mounting $BERTH_AGENT_BINARY (default the running berth
// binary, which must be static) into sandboxes as their agent, under the
// OCI runtime $BERTH_RUNTIME (default runc; runsc for gVisor), with a pool
// of $BERTH_POOL_SIZE (default localPoolSize).
func openLocal(_ context.Context, cfg registry.Config) (driver.Provider, error) {
	pool := localprovider.Pool{Size: localPoolSize}
	if v := strings.TrimSpace(cfg.Env.Get(registry.PoolSizeVar)); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, errdefs.Errorf(errdefs.InvalidArgument, "%s=%q: want a number of sandboxes (0 for none)", registry.PoolSizeVar, v)
		}
		pool.Size = n
	}
	return localprovider.New(localprovider.Options{
		StateDir:    cfg.Env.Get(localprovider.EnvStateDir),
		AgentBinary: cfg.Env.Get(localprovider.EnvAgentBinary),
		Runtime:     cfg.Env.Get(localprovider.EnvRuntime),
		Logger:      cfg.Logger,
		Pool:        pool,
	})
}

func e2b() registry.Entry {
	return registry.Entry{
		Name:    "e2b",
		Aliases: []string{"agentenv"},
		Summary: "E2B Cloud, or any server speaking the E2B API (AgentENV, berth serve) via E2B_API_URL and E2B_SANDBOX_URL",
		Credential: registry.Credential{
			KeyVars:       []string{"E2B_API_KEY"},
			FileVar:       "E2B_API_KEY_FILE",
			DefaultPath:   "~/.config/e2b/api_key",
			Flag:          "--key-file",
			ProvisionHint: keyFileHint("~/.config/e2b", "~/.config/e2b/api_key", "E2B API key"),
		},
		Forward: []string{"E2B_API_URL", "E2B_SANDBOX_URL", "E2B_DOMAIN"},
		Target:  &registry.Target{Var: "E2B_API_URL", Label: "endpoint", Default: "E2B Cloud (default)"},
		// 401 without a key still proves the control plane answers.
		Probe: &registry.Probe{URLVar: "E2B_API_URL", Default: e2bapi.DefaultAPIURL, Path: e2bapi.RouteSandboxes},
		// E2B's own default template; berth serve maps it to an image with bash.
		DefaultImage: e2bapi.DefaultTemplate,
		Capabilities: e2bprovider.Capabilities,
		Open:         openE2B,
	}
}

// openE2B hands the resolved key to the driver, which reveals it for the
// X-API-KEY header alone; the addresses come from the worker's environment.
func openE2B(_ context.Context, cfg registry.Config) (driver.Provider, error) {
	return e2bprovider.New(e2bprovider.Options{
		APIKey:     cfg.Secrets["E2B_API_KEY"],
		APIURL:     cfg.Env.Get("E2B_API_URL"),
		SandboxURL: cfg.Env.Get("E2B_SANDBOX_URL"),
		Domain:     cfg.Env.Get("E2B_DOMAIN"),
		Logger:     cfg.Logger,
	})
}

func daytona() registry.Entry {
	return registry.Entry{
		Name:    "daytona",
		Summary: "Daytona cloud sandboxes (REST and toolbox API)",
		Credential: registry.Credential{
			KeyVars:       []string{"DAYTONA_API_KEY"},
			FileVar:       "DAYTONA_API_KEY_FILE",
			DefaultPath:   "~/.config/daytona/api_key",
			Flag:          "--key-file",
			ProvisionHint: keyFileHint("~/.config/daytona", "~/.config/daytona/api_key", "Daytona API key"),
		},
		// Workers read these; an address and a region are safe by value.
		Forward: []string{"DAYTONA_API_URL", "DAYTONA_TARGET"},
		Probe:   &registry.Probe{URLVar: "DAYTONA_API_URL", Default: daytonaprovider.DefaultBaseURL, Path: "/sandbox"},
		// Tier 1 allows 300 creates a minute; auto-stop must outlast the
		// trial by 30 minutes or it lands mid-trial.
		Limits:       driver.Limits{CreatesPerSecond: 5},
		TTLMargin:    30 * time.Minute,
		Capabilities: daytonaprovider.Capabilities,
		// Daytona builds it once (FROM the image) and reuses the snapshot;
		// it has the coreutils the exec wrapper needs.
		DefaultImage: registry.DefaultPublicImage,
		Open:         openDaytona,
	}
}

// openDaytona opens the REST driver on the resolved key. The key stays a
// registry.Secret inside the driver, revealed only into the Authorization
// header. DAYTONA_DISK_QUOTA_GB, when set, caps the disk of the sandboxes
// kept at once under the account's total disk quota.
func openDaytona(_ context.Context, cfg registry.Config) (driver.Provider, error) {
	base := cfg.Env.Get("DAYTONA_API_URL")
	if base == "" {
		base = cfg.Env.Get("DAYTONA_SERVER_URL")
	}
	quota := 0
	if q := strings.TrimSpace(cfg.Env.Get("DAYTONA_DISK_QUOTA_GB")); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 0 {
			return nil, errdefs.Errorf(errdefs.InvalidArgument, "DAYTONA_DISK_QUOTA_GB=%q is not a whole number of GB", q)
		}
		quota = n
	}
	return daytonaprovider.New(daytonaprovider.Options{
		BaseURL:     base,
		APIKey:      cfg.Secrets["DAYTONA_API_KEY"],
		Target:      cfg.Env.Get("DAYTONA_TARGET"),
		Logger:      cfg.Logger,
		DiskQuotaGB: quota,
	})
}

func modal() registry.Entry {
	return registry.Entry{
		Name:    "modal",
		Summary: "Modal sandboxes (official Go SDK); cpus and memory are requests, not limits",
		Credential: registry.Credential{
			KeyVars:       []string{"MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET"},
			FileVar:       "MODAL_CONFIG_PATH",
			DefaultPath:   "~/.modal.toml",
			Flag:          "--key-file",
			ProvisionHint: "modal token new",
			ParseFile:     parseModalConfig,
		},
		Forward:     []string{"MODAL_PROFILE", "MODAL_ENVIRONMENT"},
		EnvDefaults: []registry.Var{{Name: "MODAL_SANDBOX_V2", Value: "1"}},
		Target:      &registry.Target{Var: "MODAL_ENVIRONMENT", Label: "workspace environment", Default: "the profile's default"},
		Library:     "github.com/modal-labs/modal-client/go",
		MinVersion:  "v0.11.1",
		// The create rate users quote (5/s; more per account on request).
		Limits:       driver.Limits{CreatesPerSecond: 5},
		Capabilities: modalprovider.Capabilities,
		DefaultImage: registry.DefaultPublicImage,
		Open:         openModal,
	}
}

// openModal hands the resolved token pair to the Modal SDK; the SDK is the
// only place it is revealed.
func openModal(_ context.Context, cfg registry.Config) (driver.Provider, error) {
	return modalprovider.New(modalprovider.Options{
		TokenID:     cfg.Secrets["MODAL_TOKEN_ID"].Reveal(),
		TokenSecret: cfg.Secrets["MODAL_TOKEN_SECRET"].Reveal(),
		Environment: cfg.Env.Get("MODAL_ENVIRONMENT"),
		Getenv:      cfg.Env.Get,
		Logger:      cfg.Logger,
	})
}
