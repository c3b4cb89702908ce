package core

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/internal/apikeys"
)

// Options configure the server and both of its APIs (package serve
// re-exports them as serve.Options).
type Options struct {
	// Provider hands out the sandboxes; required. The server does not
	// close it.
	Provider *sandbox.Provider
	// Keys are the accepted API keys; required.
	Keys *apikeys.Keyring
	// Domain is returned to clients as the sandboxes' domain and routes
	// data-plane calls by Host "<port>-<id>.<domain>". "" means "localhost".
	// It may end in ":PORT" when the server is reached on a port of its
	// own without a proxy in front ("localhost:3000": browsers and the
	// SDKs' getHost then name "8000-<id>.localhost:3000").
	Domain string
	// Templates maps a templateID to an image of the provider. "base" must
	// map to an image with /bin/bash: the SDKs run every command as
	// /bin/bash -l -c. When "base" is missing, BaseImage is used for it.
	Templates map[string]string
	// BaseImage is the image of template "base" when Templates lacks it.
	BaseImage string
	// MaxSandboxesPerKey caps the live sandboxes of one API key; more is
	// answered 429 with Retry-After. 0 means 20.
	MaxSandboxesPerKey int
	// Resources are the hard limits of every sandbox (cpus, memory, disk,
	// pids); zero fields take DefaultResources. The provider enforces what
	// it can: the local provider cpus, memory and pids, disk only where
	// Capabilities.Storage says so.
	Resources sandbox.Resources
	// KeyCeiling caps the sum of Resources over one key's live sandboxes;
	// a create past it is answered 429 with Retry-After. Zero fields mean
	// MaxSandboxesPerKey times the sandbox's, so that the count binds.
	KeyCeiling sandbox.Resources
	// MaxTimeout bounds a sandbox's timeout; 0 means 24 h.
	MaxTimeout time.Duration
	// MaxBodyBytes bounds a control-plane request body; 0 means 1 MiB.
	MaxBodyBytes int64
	// MaxUploadBytes bounds one POST /files body; 0 means 1 GiB.
	MaxUploadBytes int64
	// HomeDir is the default working directory and the base of relative
	// paths in sandboxes served through the sandbox API; "" means /root.
	HomeDir string
	// DenyInternet creates every sandbox without network, whatever
	// allow_internet_access says. Without it, allow_internet_access (true
	// unless a client says otherwise) gets a public network where the
	// provider has one, and none where it does not.
	DenyInternet bool
	// OpenSandbox configures the OpenSandbox API served beside the E2B API.
	OpenSandbox OpenSandboxOptions
	// TemplateBuilds configures E2B template builds (Template.build),
	// where the provider builds images.
	TemplateBuilds TemplateBuildOptions
	// AllowRegistries are registries ("host" or "host:port") that images
	// a client names may be pulled from whatever their address, and over
	// plain HTTP. Every other client-named image (a template build's
	// fromImage, an OpenSandbox create's image beyond the templates) is
	// pulled from public addresses only, failing with its reference and
	// class alone (sandbox.PullPolicy): a client cannot make the host
	// reach its loopback, private network or cloud metadata service. The
	// templates' images are the operator's own and pulled as named.
	AllowRegistries []string
	// KeepOnClose leaves the server's sandboxes running at Close (their
	// provider-side TTL still ends them); by default Close deletes them.
	KeepOnClose bool
	// Stateless keeps the E2B API's state in the provider's sandboxes
	// instead of this process (shared_store.go): ownership, the access
	// token's hash and everything else a sandbox's record holds in its
	// labels, the expiry as its TTL, the token derived from the owner's
	// key. Replicas that share the key file then serve any sandbox, and a
	// replica's death loses nothing. It needs a provider whose sandboxes
	// every process sees (Capabilities.SharedState: Kubernetes) and implies
	// KeepOnClose. The OpenSandbox API's sandboxes stay with the replica
	// that made them.
	Stateless bool
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
}

func (o *Options) fill() error {
	if o.Provider == nil {
		return sandbox.Errorf(sandbox.InvalidArgument, "serve: a provider is required")
	}
	if o.Keys == nil || o.Keys.Len() == 0 {
		return sandbox.Errorf(sandbox.InvalidArgument, "serve: at least one API key is required")
	}
	if o.Domain == "" {
		o.Domain = "localhost"
	}
	o.Domain = strings.ToLower(strings.TrimSuffix(o.Domain, "."))
	if !validDomain(o.Domain) {
		return sandbox.Errorf(sandbox.InvalidArgument, "serve: domain %q must be a host name, optionally with :PORT (no scheme or path)", o.Domain)
	}
	o.Templates = maps.Clone(o.Templates)
	if o.Templates == nil {
		o.Templates = map[string]string{}
	}
	if _, ok := o.Templates[e2bapi.DefaultTemplate]; !ok && o.BaseImage != "" {
		o.Templates[e2bapi.DefaultTemplate] = o.BaseImage
	}
	if len(o.Templates) == 0 {
		return sandbox.Errorf(sandbox.InvalidArgument, "serve: no template: give a base image or --template NAME=IMAGE")
	}
	for name, img := range o.Templates {
		if name == "" || img == "" {
			return sandbox.Errorf(sandbox.InvalidArgument, "serve: template %q=%q: both name and image are required", name, img)
		}
	}
	o.AllowRegistries = slices.Clone(o.AllowRegistries)
	if err := o.ClientPull().Validate(); err != nil {
		return fmt.Errorf("serve: allowed registries: %w", err)
	}
	if o.MaxSandboxesPerKey <= 0 {
		o.MaxSandboxesPerKey = 20
	}
	var err error
	if o.Resources, o.KeyCeiling, err = fillResources(o.Resources, o.KeyCeiling, o.MaxSandboxesPerKey); err != nil {
		return err
	}
	if o.MaxTimeout <= 0 {
		o.MaxTimeout = 24 * time.Hour
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 1 << 20
	}
	if o.MaxUploadBytes <= 0 {
		o.MaxUploadBytes = 1 << 30
	}
	if o.HomeDir == "" {
		o.HomeDir = "/root"
	}
	o.OpenSandbox.fill()
	if err := o.TemplateBuilds.fill(); err != nil {
		return err
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Stateless {
		if !o.Provider.Capabilities().SharedState {
			return sandbox.Errorf(sandbox.InvalidArgument, "serve: stateless needs a provider whose sandboxes every process sees (such as k8s); %s keeps them in one process", o.Provider.Name())
		}
		o.KeepOnClose = true // the other replicas serve them on
	}
	return nil
}

// OpenSandboxOptions configure the OpenSandbox API of the server.
type OpenSandboxOptions struct {
	// Images are the image references a create may name beyond the
	// templates (a template's name is always accepted and maps to its
	// image): a reference is accepted when it starts with one of them, and
	// "*" accepts any. The provider pulls what is named, so the operator
	// decides.
	Images []string
	// EndpointHost is the host[:port][/prefix] that endpoint answers point
	// clients at (upstream's server.eip); "" uses the Host of the request,
	// the address the client already reaches the server by.
	EndpointHost string
	// Disabled turns the OpenSandbox API off.
	Disabled bool
	// MaxLogBytesPerCommand, MaxLogBytesPerSandbox and MaxLogBytesPerKey
	// bound the background command output kept in memory for execd's
	// logs call: 16 MiB, 64 MiB and 256 MiB. Past a bound the output
	// written least recently goes first, and the logs answer says how
	// much (opensandbox.DroppedHeader).
	MaxLogBytesPerCommand, MaxLogBytesPerSandbox, MaxLogBytesPerKey int64
}

// fill sets the per-key default; execd fills the others (opensandbox.Options).
func (o *OpenSandboxOptions) fill() {
	if o.MaxLogBytesPerKey <= 0 {
		o.MaxLogBytesPerKey = 256 << 20
	}
}

// ParseTemplate parses a --template NAME=IMAGE flag.
func ParseTemplate(kv string) (name, image string, err error) {
	name, image, ok := strings.Cut(kv, "=")
	if !ok || name == "" || image == "" {
		return "", "", sandbox.Errorf(sandbox.InvalidArgument, "template %q is not NAME=IMAGE", kv)
	}
	return name, image, nil
}

// TemplateNames lists the templates of Templates, for messages.
func (o *Options) TemplateNames() string {
	return strings.Join(slices.Sorted(maps.Keys(o.Templates)), ", ")
}

// ClientPull is the policy of a pull of an image a client named.
func (o *Options) ClientPull() *sandbox.PullPolicy {
	return &sandbox.PullPolicy{Allow: o.AllowRegistries}
}

// Image is the image of a template of Templates; NotFound names them.
func (o *Options) Image(template string) (string, error) {
	img, ok := o.Templates[template]
	if !ok {
		return "", sandbox.Errorf(sandbox.NotFound, "template %q is not served here (templates: %s)", template, o.TemplateNames())
	}
	return img, nil
}

// validDomain: a host name, optionally followed by ":PORT".
func validDomain(d string) bool {
	host, port, hasPort := strings.Cut(d, ":")
	if host == "" || strings.ContainsAny(host, "/@ []") {
		return false
	}
	if hasPort {
		n, err := strconv.Atoi(port)
		return err == nil && n > 0 && n < 65536 && !strings.HasPrefix(port, "+")
	}
	return true
}
