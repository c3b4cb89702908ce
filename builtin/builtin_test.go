package builtin

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	k8sprovider "github.com/berth-sh/berth/providers/k8s"
	localprovider "github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

func entry(t *testing.T, name string) registry.Entry {
	t.Helper()
	e, err := Registry().Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// The entries carry the facts file's values.
func TestEntriesMatchFacts(t *testing.T) {
	tests := []struct {
		name, file, def, target string
		keys, forward, aliases  []string
		defaults                []registry.Var
		library, min, hint      string
	}{
		{name: "local"},
		{name: "e2b", keys: []string{"E2B_API_KEY"}, file: "E2B_API_KEY_FILE", def: "~/.config/e2b/api_key",
			forward: []string{"E2B_API_URL", "E2B_SANDBOX_URL", "E2B_DOMAIN"}, aliases: []string{"agentenv"},
			target: "E2B_API_URL|endpoint|E2B Cloud (default)"},
		{name: "daytona", keys: []string{"DAYTONA_API_KEY"}, file: "DAYTONA_API_KEY_FILE", def: "~/.config/daytona/api_key",
			forward: []string{"DAYTONA_API_URL", "DAYTONA_TARGET"}},
		{name: "modal", keys: []string{"MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET"}, file: "MODAL_CONFIG_PATH", def: "~/.modal.toml",
			forward: []string{"MODAL_PROFILE", "MODAL_ENVIRONMENT"}, defaults: []registry.Var{{Name: "MODAL_SANDBOX_V2", Value: "1"}},
			target:  "MODAL_ENVIRONMENT|workspace environment|the profile's default",
			library: "github.com/modal-labs/modal-client/go", min: "v0.11.1", hint: "modal token new"},
	}
	for _, tt := range tests {
		e := entry(t, tt.name)
		c := e.Credential
		if !slices.Equal(c.KeyVars, tt.keys) || c.FileVar != tt.file || c.DefaultPath != tt.def {
			t.Errorf("%s credential = %v %q %q", tt.name, c.KeyVars, c.FileVar, c.DefaultPath)
		}
		if tt.keys != nil && c.Flag != "--key-file" {
			t.Errorf("%s flag = %q", tt.name, c.Flag)
		}
		if !slices.Equal(e.Forward, tt.forward) || !slices.Equal(e.Aliases, tt.aliases) || !slices.Equal(e.EnvDefaults, tt.defaults) {
			t.Errorf("%s forward %v aliases %v defaults %v", tt.name, e.Forward, e.Aliases, e.EnvDefaults)
		}
		var target string
		if e.Target != nil {
			target = e.Target.Var + "|" + e.Target.Label + "|" + e.Target.Default
		}
		if target != tt.target {
			t.Errorf("%s target %q, want %q", tt.name, target, tt.target)
		}
		if e.Library != tt.library || e.MinVersion != tt.min {
			t.Errorf("%s library %q %q", tt.name, e.Library, e.MinVersion)
		}
		if tt.hint != "" && c.ProvisionHint != tt.hint {
			t.Errorf("%s hint %q", tt.name, c.ProvisionHint)
		}
		if e.Summary == "" {
			t.Errorf("%s has no summary", tt.name)
		}
	}
	local := entry(t, "local")
	if !local.Credential.None() || !slices.Contains(local.Requires, registry.Requirement{Binary: "runc", Hint: "apt-get install runc"}) ||
		!slices.ContainsFunc(local.Requires, func(r registry.Requirement) bool { return r.Root }) {
		t.Errorf("local requires %+v", local.Requires)
	}
	if c := local.Capabilities(); c.ResourceMode != driver.ResourcesLimits || !c.Supports(driver.NetworkNone) || !c.Supports(driver.NetworkPublic) {
		t.Errorf("local capabilities %+v", c)
	}
	if p := entry(t, "e2b").Probe; p == nil || p.URLVar != "E2B_API_URL" || p.Default != "https://api.e2b.app" {
		t.Errorf("e2b probe %+v", p)
	}
	if p := entry(t, "daytona").Probe; p == nil || p.URLVar != "DAYTONA_API_URL" || p.Default != "https://app.daytona.io/api" {
		t.Errorf("daytona probe %+v", p)
	}
}

func TestRegistryNames(t *testing.T) {
	r := Registry()
	if got, want := r.Names(), []string{"daytona", "e2b", "k8s", "local", "modal"}; !slices.Equal(got, want) {
		t.Fatalf("Names = %v, want %v", got, want)
	}
	if e, err := r.Lookup("agentenv"); err != nil || e.Name != "e2b" {
		t.Fatalf("agentenv -> %q, %v; want e2b", e.Name, err)
	}
	_, err := r.Lookup("docker")
	want := `unknown backend "docker" (registered: daytona, e2b (alias agentenv), k8s (alias kubernetes), local, modal)`
	if err == nil || err.Error() != want || !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("unknown backend: %v", err)
	}
	// Register fills a registry once; twice is a programming error.
	defer func() {
		if recover() == nil {
			t.Fatal("registering the built-ins twice did not panic")
		}
	}()
	Register(r)
}

// TestEntriesClaimOnlyWhatDriversDo: every entry's capabilities are its
// opened driver's, field for field: an entry cannot claim a feature whose
// call the driver lacks. On 6f9918d the e2b entry claimed pause, which the
// driver has no call for, and providers.txtar enshrined it (this test does
// not compile there: entries held a literal): checked there, `berth
// providers --json` said e2b pause true, so providers.txtar's
// "jsonget stdout name=e2b.capabilities.pause false" line failed.
func TestEntriesClaimOnlyWhatDriversDo(t *testing.T) {
	home := t.TempDir()
	env := registry.MapEnviron(map[string]string{
		"E2B_API_KEY": "k-entry-test", "DAYTONA_API_KEY": "k-entry-test", "MODAL_TOKEN_ID": "i", "MODAL_TOKEN_SECRET": "s",
		localprovider.EnvStateDir: t.TempDir(), registry.PoolSizeVar: "0",
	}, home)
	ctx := context.Background()
	r := Registry()
	for _, name := range r.Names() {
		t.Run(name, func(t *testing.T) {
			e := entry(t, name)
			if name == "local" && os.Geteuid() != 0 {
				// Opening local needs root; its driver's method returns the
				// same function the entry names.
				if !reflect.DeepEqual(e.Capabilities(), localprovider.ProviderCapabilities()) {
					t.Errorf("entry %+v, driver %+v", e.Capabilities(), localprovider.ProviderCapabilities())
				}
				return
			}
			if name == "k8s" {
				// Opening k8s syncs an informer with a cluster; the entry
				// names the driver package's own derivation.
				if !reflect.DeepEqual(e.Capabilities(), k8sprovider.ProviderCapabilities()) {
					t.Errorf("entry %+v, driver %+v", e.Capabilities(), k8sprovider.ProviderCapabilities())
				}
				return
			}
			p, err := r.Open(ctx, name, env, nil)
			if err != nil {
				t.Fatalf("open %s offline: %v", name, err)
			}
			defer p.Close()
			if got, want := e.Capabilities(), p.Capabilities(); !reflect.DeepEqual(got, want) {
				t.Errorf("entry claims %+v\ndriver does  %+v", got, want)
			}
		})
	}
	// Open resolves the credential first: without one it fails Unauthenticated.
	_, err := r.Open(ctx, "e2b", registry.MapEnviron(nil, t.TempDir()), nil)
	if !errors.Is(err, errdefs.ErrUnauthenticated) {
		t.Fatalf("Open without a credential: %v", err)
	}
}

// The provision hints write the key file with mode 600 from a prompt; the
// key never appears in the hint or on a command line.
func TestProvisionHints(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash in PATH")
	}
	for _, name := range []string{"e2b", "daytona"} {
		t.Run(name, func(t *testing.T) {
			e := entry(t, name)
			home := t.TempDir()
			cmd := exec.Command(bash, "-c", e.Credential.ProvisionHint)
			cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
			cmd.Stdin = strings.NewReader("key-from-prompt\n")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("hint %q: %v\n%s", e.Credential.ProvisionHint, err, out)
			}
			path := registry.MapEnviron(nil, home).ExpandHome(e.Credential.DefaultPath)
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("mode %v, want 0600", fi.Mode().Perm())
			}
			got, err := e.Resolve(registry.MapEnviron(nil, home))
			if err != nil || got[e.Credential.KeyVars[0]].Reveal() != "key-from-prompt" {
				t.Fatalf("the provisioned file does not resolve: %v", err)
			}
		})
	}
}
