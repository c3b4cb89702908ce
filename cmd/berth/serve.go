package main

import (
	"context"
	"fmt"
	"log/slog"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth/internal/apikeys"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/serve"
)

// defaultBaseImage is template "base" when neither --base-image nor the
// provider's entry names one: it has /bin/bash, which the SDKs need.
const defaultBaseImage = registry.DefaultPublicImage

func (a *app) serveCmd() *cobra.Command {
	var backend, addr, keyFile, domain, baseImage, home, logLevel string
	var templates, osbImages []string
	var pool int
	var stateless bool
	var opts serve.Options
	cmd := &cobra.Command{
		Use:   "serve [--addr 127.0.0.1:3000] [--backend NAME] [--api-keys FILE] [--domain D] [--template NAME=IMAGE]...",
		Short: "Serve the E2B and OpenSandbox APIs over any provider, for their official SDKs",
		Long: `Serve the E2B API (control plane and envd data plane on one address) with
sandboxes from any provider, so that the official E2B SDKs and the tools
built on them use berth by changing two URLs. On start it prints the
environment a client needs (E2B_API_URL, E2B_SANDBOX_URL, E2B_DOMAIN); the
client's E2B_API_KEY is a key from the --api-keys file.

The key file holds one key per line and must not be readable by others. If
it does not exist, it is created (mode 0600) with a new key, which is
printed once to stderr.

templateID maps to an image through --template NAME=IMAGE; "base", the
SDKs' default, is --base-image unless a --template names it. The SDKs run
every command as /bin/bash -l -c, so templates need bash.

Each sandbox lives for the timeout its client asked for (15 s for v1
creates that name none, 300 s for v2), enforced by this server and passed to
the provider as its TTL. Stopping the server deletes its sandboxes.

Over a provider whose sandboxes every process sees (k8s), the server is
stateless by default (--stateless): each sandbox's owner, token hash and
expiry live in the sandbox's own objects, so any number of replicas behind
one Service, sharing the key file, serve any sandbox, and stopping or losing
a replica deletes nothing.

Every sandbox gets hard limits (--sandbox-cpus, --sandbox-memory-mb,
--sandbox-pids, --sandbox-disk-mb where the provider enforces disk), which
clients cannot change; the --key-* ceilings cap what one API key's
sandboxes hold in all.

E2B template builds (the SDKs' Template.build: an image, run commands,
copied files, env, workdir, user, start and ready commands) run where the
provider builds images (local: its Dockerfile builder); a template then
names sandboxes by its alias. Templates belong to the API key that built
them and last as long as the server; their images stay in the provider's
store. --no-template-builds answers those routes 501.

The same address serves OpenSandbox's lifecycle and execd APIs (routes
under /v1/ and /sandboxes/{id}/proxy/), as NeMo Gym's opensandbox provider
and the OpenSandbox SDKs call them: set OPENSANDBOX_DOMAIN (or the SDK's
domain) to host:port of this server and OPEN_SANDBOX_API_KEY to a key from
the same file, with use_server_proxy on. A create names an image: a
--template name, or an image allowed by --opensandbox-image PREFIX ("*"
allows any, which the provider then pulls). Its resourceLimits ("2",
"8192Mi") are limits up to the --key-* ceilings; its timeout is the
sandbox's life (none means --max-timeout).

An image a client names (a template build's fromImage, an OpenSandbox
create's image under --opensandbox-image) is pulled from public addresses
only: every connection of that pull, redirects included, to a loopback,
private, link-local, cloud-metadata (169.254.169.254) or other non-public
address is refused where it is dialled, and a failed pull tells the client
its class and the reference, never what the registry said (that goes to
this server's log). --allow-registry HOST[:PORT] trusts a registry of your
own network (no port: any port), over plain HTTP too. The images of
--template and --base-image are yours and pulled as named.`,
		Example: `  berth serve --backend local --template python=python:3.12-slim
  export E2B_API_URL=http://127.0.0.1:3000 E2B_SANDBOX_URL=http://127.0.0.1:3000 E2B_DOMAIN=localhost
  export E2B_API_KEY=$(cat ~/.config/berth/serve_api_keys)`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			opts.Templates = map[string]string{}
			for _, kv := range templates {
				name, image, err := serve.ParseTemplate(kv)
				if err != nil {
					return usageError(err)
				}
				opts.Templates[name] = image
			}
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return usageError(fmt.Errorf("--log-level %q is not debug, info, warn or error", logLevel))
			}
			opts.Logger = slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: lvl}))
			opts.Domain, opts.HomeDir = domain, home
			opts.OpenSandbox.Images = osbImages
			name := a.backendName(backend)
			opts.BaseImage = baseImage
			if opts.BaseImage == "" {
				if e, err := a.reg.Lookup(name); err == nil && e.DefaultImage != "" {
					opts.BaseImage = e.DefaultImage
				} else {
					opts.BaseImage = defaultBaseImage
				}
			}
			keys, err := apikeys.LoadOrCreate(a.env.ExpandHome(keyFile), a.stderr)
			if err != nil {
				return usageError(err)
			}
			opts.Keys = keys
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM)
			defer stop()
			knobs := map[string]string{}
			if cmd.Flags().Changed("pool") || !a.env.Set(registry.PoolSizeVar) {
				knobs[registry.PoolSizeVar] = strconv.Itoa(pool)
			}
			p, err := a.openWith(ctx, backend, knobs)
			if err != nil {
				return err
			}
			defer p.Close()
			opts.Provider = p
			opts.Stateless = p.Capabilities().SharedState
			if cmd.Flags().Changed("stateless") {
				opts.Stateless = stateless
			}
			rctx, stopReap := context.WithCancel(ctx)
			defer stopReap()
			go reapLoop(rctx, p, reapEvery, opts.Logger)
			return classExit(serve.ListenAndServe(ctx, addr, opts, func(u serve.URLs) {
				fmt.Fprintf(a.stdout, "# berth serve: the E2B API over %q; point clients here:\n%s", p.Name(), u.Exports())
				if !opts.OpenSandbox.Disabled {
					fmt.Fprintf(a.stdout, "# the OpenSandbox API on the same address (use_server_proxy on):\nexport OPENSANDBOX_DOMAIN=%s\n", strings.TrimPrefix(u.APIURL, "http://"))
				}
				if f, ok := a.stdout.(interface{ Sync() error }); ok {
					_ = f.Sync()
				}
			}))
		}),
	}
	a.backendFlag(cmd, &backend)
	f := cmd.Flags()
	f.StringVar(&addr, "addr", "127.0.0.1:3000", "listen address (host:port; port 0 picks one)")
	f.IntVar(&pool, "pool", 2, "sandboxes kept started ahead of create, of any template, per network mode, where the provider can (local); 0 for none")
	f.StringVar(&keyFile, "api-keys", "~/.config/berth/serve_api_keys", "API key file, one key per line (created with a new key if absent)")
	f.StringVar(&domain, "domain", "localhost", "sandbox domain returned to clients; routes Host <port>-<id>.DOMAIN")
	f.StringArrayVar(&templates, "template", nil, "templateID=image (repeatable)")
	f.StringVar(&baseImage, "base-image", "", "image of template \"base\" (default: the provider's default image, else "+defaultBaseImage+")")
	f.StringVar(&home, "home", "/root", "default working directory and base of relative paths (sandboxes served through the sandbox API)")
	f.IntVar(&opts.MaxSandboxesPerKey, "max-sandboxes-per-key", 20, "live sandboxes one API key may hold; more is answered 429")
	f.DurationVar(&opts.MaxTimeout, "max-timeout", 24*time.Hour, "longest sandbox timeout a client may ask for")
	f.Int64Var(&opts.MaxUploadBytes, "max-upload-bytes", 1<<30, "largest file upload, counted in the bytes written (a gzip body decompressed)")
	d := serve.DefaultResources
	f.Float64Var(&opts.Resources.CPUs, "sandbox-cpus", d.CPUs, "cpu limit of every sandbox (cores)")
	f.IntVar(&opts.Resources.MemoryMB, "sandbox-memory-mb", d.MemoryMB, "memory limit of every sandbox")
	f.IntVar(&opts.Resources.StorageMB, "sandbox-disk-mb", d.StorageMB, "disk limit of every sandbox, where the provider enforces one")
	f.Int64Var(&opts.Resources.PIDs, "sandbox-pids", d.PIDs, "process limit of every sandbox")
	f.Float64Var(&opts.KeyCeiling.CPUs, "key-cpus", 0, "cpus one API key's sandboxes may hold in all; more is answered 429 (0: max-sandboxes-per-key times --sandbox-cpus)")
	f.IntVar(&opts.KeyCeiling.MemoryMB, "key-memory-mb", 0, "memory one API key's sandboxes may hold in all (0: max-sandboxes-per-key times the sandbox's)")
	f.IntVar(&opts.KeyCeiling.StorageMB, "key-disk-mb", 0, "disk one API key's sandboxes may hold in all (0: max-sandboxes-per-key times the sandbox's)")
	f.Int64Var(&opts.KeyCeiling.PIDs, "key-pids", 0, "processes one API key's sandboxes may hold in all (0: max-sandboxes-per-key times the sandbox's)")
	f.StringArrayVar(&opts.AllowRegistries, "allow-registry", nil, "registry HOST[:PORT] that images clients name may be pulled from although its address is not public, over plain HTTP too (repeatable)")
	f.StringArrayVar(&osbImages, "opensandbox-image", nil, `image reference prefix an OpenSandbox create may name beyond the templates (repeatable; "*" allows any)`)
	f.StringVar(&opts.OpenSandbox.EndpointHost, "opensandbox-endpoint-host", "", "host[:port][/prefix] OpenSandbox endpoint answers point clients at (default: the Host the client called)")
	f.BoolVar(&opts.OpenSandbox.Disabled, "no-opensandbox", false, "do not serve the OpenSandbox API")
	f.Int64Var(&opts.OpenSandbox.MaxLogBytesPerCommand, "opensandbox-command-log-bytes", 16<<20, "output of one OpenSandbox background command kept for its logs call (its tail)")
	f.Int64Var(&opts.OpenSandbox.MaxLogBytesPerSandbox, "opensandbox-sandbox-log-bytes", 64<<20, "background command output one OpenSandbox sandbox keeps in all (the least recently written goes first)")
	f.Int64Var(&opts.OpenSandbox.MaxLogBytesPerKey, "opensandbox-key-log-bytes", 256<<20, "background command output one API key's OpenSandbox sandboxes keep in all")
	f.BoolVar(&opts.DenyInternet, "deny-internet", false, "create every sandbox without network, whatever clients ask")
	tb := &opts.TemplateBuilds
	f.BoolVar(&tb.Disabled, "no-template-builds", false, "do not build E2B templates (Template.build answers 501)")
	f.StringVar(&tb.Dir, "template-dir", "", "directory of template uploads and build contexts (default: a temporary one, removed at exit)")
	f.DurationVar(&tb.BuildTimeout, "template-build-timeout", 30*time.Minute, "longest template build")
	f.IntVar(&tb.MaxConcurrentBuildsPerKey, "max-builds-per-key", 2, "template builds one API key may have going; more is answered 429")
	f.Int64Var(&tb.MaxUploadBytes, "max-template-upload-bytes", 256<<20, "largest archive of a template's copied files, as sent")
	f.IntVar(&tb.MaxUploadsPerKey, "max-template-uploads-per-key", 4, "template archives one API key may be sending at once; more wait up to --template-upload-grace, then are answered 429")
	f.Int64Var(&tb.MinUploadRate, "template-upload-min-rate", 64<<10, "slowest a template archive may be sent, in bytes per second averaged over the upload, once --template-upload-grace has passed (slower: 408)")
	f.DurationVar(&tb.UploadGrace, "template-upload-grace", 30*time.Second, "time a template archive upload has before --template-upload-min-rate counts")
	f.BoolVar(&opts.KeepOnClose, "keep-sandboxes", false, "leave sandboxes running when the server stops (their TTL still ends them)")
	f.BoolVar(&stateless, "stateless", false, "keep sandbox ownership, token hashes and expiry in the provider's objects, for replicas (default: on where the provider's sandboxes are shared, as k8s's)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	return cmd
}
