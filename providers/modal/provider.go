package modal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strings"
	"sync"
	"time"

	sdk "github.com/modal-labs/modal-client/go"
	"google.golang.org/grpc"

	"github.com/berth-sh/berth/providers/internal/allowlist"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

var (
	_ driver.Provider      = (*Provider)(nil)
	_ driver.ImagePreparer = (*Provider)(nil)
)

// Defaults of Options.
const (
	DefaultApp             = "berth"
	DefaultGPUType         = "any"
	DefaultMaxThrottleWait = 30 * time.Second
)

// maxTTL is the longest sandbox timeout Modal accepts.
const maxTTL = 24 * time.Hour

// Capabilities are what the driver supports: the interfaces its handles
// implement (driver.Derive: no SetTimeout, since a Modal sandbox's timeout
// is fixed at creation, and no Signal, since an exec has no kill call), and
// the facts they cannot show: requests by default and limits when the Spec
// asks, no egress, full egress or an allowlist of CIDRs and domains, GPUs
// (which the SDK creates on Modal's V1 backend).
func Capabilities() driver.Capabilities {
	return driver.Derive[*Provider, *sandbox, *process](driver.Capabilities{
		ResourceMode: driver.ResourcesBoth,
		Networks:     []driver.NetworkMode{driver.NetworkNone, driver.NetworkPublic, driver.NetworkAllowlist},
		GPUs:         true,
		MaxTTL:       maxTTL,
		Ports:        []driver.PortProtocol{driver.PortHTTP, driver.PortTCP},
		// Tunnels open at create: Spec.Ports must name them.
		PortsAtCreate: true,
	})
}

// Options configure the driver.
type Options struct {
	// TokenID and TokenSecret are the Modal token pair; both are required.
	TokenID, TokenSecret string
	// Environment is the workspace environment; "" means the profile's
	// default.
	Environment string
	// App is the app that holds the sandboxes; "" means DefaultApp.
	App string
	// GPUType is the GPU type asked for when a Spec wants GPUs; "" means
	// DefaultGPUType.
	GPUType string
	// MaxThrottleWait bounds how long the SDK waits out server throttles on
	// one call before returning them; 0 means DefaultMaxThrottleWait and a
	// negative value returns every throttle at once.
	MaxThrottleWait time.Duration
	// Getenv reads the caller's environment (registry.Config.Env); nil skips
	// the check that it agrees with the process environment on the variables
	// the SDK reads itself.
	Getenv func(string) string
	// Logger receives the driver's and the SDK's logs; nil discards them.
	Logger *slog.Logger
	// UnaryInterceptors and StreamInterceptors observe the SDK's calls to
	// Modal's control plane (tracing; the live tests' transcripts). They
	// run after the SDK's own; the command router's calls do not pass
	// them.
	UnaryInterceptors  []grpc.UnaryClientInterceptor
	StreamInterceptors []grpc.StreamClientInterceptor
}

// Provider is the Modal driver.
type Provider struct {
	opts   Options
	client *sdk.Client
	log    *slog.Logger

	// ctx bounds background work (exec drains and waits); Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	stdin  stdinGate // stdin calls in flight, which Close waits for

	mu      sync.Mutex
	app     *sdk.App
	images  map[string]*sdk.Image // built images by reference
	handles map[*sandbox]bool     // open handles, detached by Close
}

// New opens the driver. It does not contact Modal: the app and images are
// looked up on first use.
func New(opts Options) (*Provider, error) {
	if opts.TokenID == "" || opts.TokenSecret == "" {
		return nil, errdefs.Errorf(errdefs.Unauthenticated, "a Modal token id and token secret are both required")
	}
	if opts.App == "" {
		opts.App = DefaultApp
	}
	if opts.GPUType == "" {
		opts.GPUType = DefaultGPUType
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := checkProcessEnv(opts.Getenv, os.Getenv); err != nil {
		return nil, err
	}
	wait := opts.MaxThrottleWait
	switch {
	case wait == 0:
		wait = DefaultMaxThrottleWait
	case wait < 0:
		wait = 0 // the SDK's "never wait"
	}
	client, err := sdk.NewClientWithOptions(&sdk.ClientParams{
		TokenID:                opts.TokenID,
		TokenSecret:            opts.TokenSecret,
		Environment:            opts.Environment,
		Logger:                 opts.Logger,
		MaxThrottleWait:        &wait,
		GRPCUnaryInterceptors:  opts.UnaryInterceptors,
		GRPCStreamInterceptors: append([]grpc.StreamClientInterceptor{captureBuildLog}, opts.StreamInterceptors...),
	})
	if err != nil {
		// The SDK's message may quote its config file, which holds the
		// token: keep the cause reachable but do not print it.
		return nil, errdefs.Classify(errdefs.InvalidArgument, &redacted{
			msg:   "the Modal SDK could not start (is MODAL_CONFIG_PATH or ~/.modal.toml valid TOML, and MODAL_SERVER_URL a http:// or https:// URL?)",
			cause: err,
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Provider{
		opts:    opts,
		client:  client,
		log:     opts.Logger,
		ctx:     ctx,
		cancel:  cancel,
		images:  map[string]*sdk.Image{},
		handles: map[*sandbox]bool{},
	}, nil
}

// sdkEnv are the variables that change where and how the SDK talks to
// Modal and that it reads only from the process environment (or a profile
// file), whatever the caller's environment says. MODAL_PROFILE and
// MODAL_CONFIG_PATH are not among them: the token pair, the part of a
// profile the registry resolves, is handed to the SDK directly.
var sdkEnv = []string{"MODAL_SERVER_URL", "MODAL_SANDBOX_V2"}

// checkProcessEnv refuses a caller environment that differs from the
// process's on a variable the SDK reads itself: the caller's value would be
// silently ignored. Values are not quoted: a URL may carry credentials.
func checkProcessEnv(caller, process func(string) string) error {
	if caller == nil {
		return nil
	}
	for _, k := range sdkEnv {
		want, have := caller(k), process(k)
		if k == "MODAL_SANDBOX_V2" {
			// Unset is the SDK's default, which is on.
			if flag(want, true) == flag(have, true) {
				continue
			}
		} else if want == have {
			continue
		}
		return errdefs.Errorf(errdefs.InvalidArgument,
			"%s differs between the provider's environment and this process's; the Modal SDK reads it from the process environment, so set it there", k)
	}
	return nil
}

// flag reads a boolean variable as the SDK does: "", "0" and "false" are
// off; unset is def.
func flag(v string, def bool) bool {
	if v == "" {
		return def
	}
	switch strings.ToLower(v) {
	case "0", "false":
		return false
	}
	return true
}

// Capabilities reports what the driver supports.
func (p *Provider) Capabilities() driver.Capabilities { return Capabilities() }

// Close stops background work, detaches the handles still open and closes
// the SDK's connections. Sandboxes keep running.
func (p *Provider) Close() error {
	p.cancel()
	p.wg.Wait()
	if !p.stdin.close(stdinCloseWait) {
		p.log.Debug("modal: stdin calls still in flight at close")
	}
	p.mu.Lock()
	open := make([]*sandbox, 0, len(p.handles))
	for h := range p.handles {
		open = append(open, h)
	}
	p.mu.Unlock()
	for _, h := range open {
		_ = h.Close()
	}
	p.client.Close()
	return nil
}

// appHandle looks the app up once, creating it if missing.
func (p *Provider) appHandle(ctx context.Context) (*sdk.App, error) {
	p.mu.Lock()
	app := p.app
	p.mu.Unlock()
	if app != nil {
		return app, nil
	}
	app, err := p.client.Apps.FromName(ctx, p.opts.App, &sdk.AppFromNameParams{CreateIfMissing: true})
	if err != nil {
		env := p.opts.Environment
		if env == "" {
			env = "the profile's default"
		}
		return nil, fmt.Errorf("app %q in environment %s: %w", p.opts.App, env, classify(err))
	}
	p.mu.Lock()
	p.app = app
	p.mu.Unlock()
	return app, nil
}

// PrepareImage builds the Spec's image ahead of Create.
func (p *Provider) PrepareImage(ctx context.Context, spec driver.Spec) error {
	if spec.Image == "" {
		return nil
	}
	_, err := p.image(ctx, spec.Image)
	return err
}

// image returns the built image of a registry reference. Built images are
// remembered; Modal deduplicates concurrent builds of one Dockerfile.
func (p *Provider) image(ctx context.Context, ref string) (*sdk.Image, error) {
	if id, ok := strings.CutPrefix(ref, ImagePrefix); ok {
		return p.imageByID(ctx, id)
	}
	if err := checkImageRef(ref); err != nil {
		return nil, err
	}
	p.mu.Lock()
	img := p.images[ref]
	p.mu.Unlock()
	if img != nil {
		return img, nil
	}
	app, err := p.appHandle(ctx)
	if err != nil {
		return nil, err
	}
	log := &buildLog{}
	img, err = p.client.Images.FromRegistry(ref, nil).Build(withBuildLog(ctx, log), app, nil)
	if err != nil {
		if as[sdk.RemoteError](err) {
			return nil, errdefs.Errorf(errdefs.InvalidArgument, "build image %s: %w%s", ref, err, log.tail())
		}
		return nil, fmt.Errorf("build image %s: %w", ref, classify(err))
	}
	p.mu.Lock()
	p.images[ref] = img
	p.mu.Unlock()
	return img, nil
}

// checkImageRef refuses what is not a plain image reference: the SDK pastes
// it after "FROM " in a Dockerfile, so a line break or a space would add
// instructions of the caller's choosing.
func checkImageRef(ref string) error {
	if len(ref) > 512 {
		return errdefs.Errorf(errdefs.InvalidArgument, "image reference is %d bytes, at most 512", len(ref))
	}
	for _, r := range ref {
		if r <= ' ' || r == 0x7f {
			return errdefs.Errorf(errdefs.InvalidArgument, "image reference %q contains a space or control character", ref)
		}
	}
	return nil
}

// Create makes a sandbox from spec.
func (p *Provider) Create(ctx context.Context, spec driver.Spec) (driver.Sandbox, error) {
	if spec.User != "" && spec.User != "root" {
		return nil, errUser
	}
	params, err := p.createParams(spec)
	if err != nil {
		return nil, err
	}
	img, err := p.image(ctx, spec.Image)
	if err != nil {
		return nil, err
	}
	app, err := p.appHandle(ctx)
	if err != nil {
		return nil, err
	}
	sb, err := p.client.Sandboxes.Create(ctx, app, img, params)
	if err != nil {
		return nil, classify(err)
	}
	return p.handle(sb), nil
}

var errUser = errdefs.Errorf(errdefs.NotSupported, "Modal runs commands as the image's user; another user is not supported")

// createParams maps a Spec onto the SDK's create parameters. The Spec has
// been validated and has its defaults.
func (p *Provider) createParams(spec driver.Spec) (*sdk.SandboxCreateParams, error) {
	r := spec.Resources
	params := &sdk.SandboxCreateParams{
		CPU:          r.CPUs,
		MemoryMiB:    r.MemoryMB,
		Timeout:      ceilSeconds(spec.TTL),
		Workdir:      spec.WorkDir,
		Env:          spec.Env,
		BlockNetwork: spec.Network.Mode == driver.NetworkNone,
		Tags:         spec.Labels,
	}
	openPorts(params, spec.Ports)
	if r.Limits {
		params.CPULimit, params.MemoryLimitMiB = r.CPUs, r.MemoryMB
	}
	if r.GPUs > 0 {
		params.GPU = fmt.Sprintf("%s:%d", p.opts.GPUType, r.GPUs)
	}
	if r.StorageMB > 0 {
		// Modal has no disk size for sandboxes.
		p.log.Debug("modal: ignoring the storage size; Modal sandboxes have no disk knob", "storage_mb", r.StorageMB)
	}
	if spec.Network.Mode == driver.NetworkAllowlist {
		// Both lists are sent, empty or not: a non-nil one puts Modal in
		// allowlist mode, and an empty one allows nothing of its kind.
		cidrs, domains, err := allowlist.Split("modal", spec.Network.Allow)
		if err != nil {
			return nil, err
		}
		params.OutboundCIDRAllowlist = &sdk.Allowlist{Entries: cidrs}
		params.OutboundDomainAllowlist = &sdk.Allowlist{Entries: domains}
	}
	return params, nil
}

// ceilSeconds rounds d up to whole seconds (at least one): the SDK takes
// timeouts in whole seconds.
func ceilSeconds(d time.Duration) time.Duration {
	s := math.Ceil(d.Seconds())
	return time.Duration(max(s, 1)) * time.Second
}

// attach returns an SDK handle to a running sandbox: NotFound for an unknown
// ID or one that has ended.
func (p *Provider) attach(ctx context.Context, id string) (*sdk.Sandbox, error) {
	sb, err := p.client.Sandboxes.FromID(ctx, id, nil)
	if err != nil {
		return nil, classify(err)
	}
	code, err := sb.Poll(ctx, nil)
	if err == nil && code != nil {
		err = errdefs.Errorf(errdefs.NotFound, "sandbox has ended (exit %d)", *code)
	}
	if err != nil {
		_ = sb.Detach()
		return nil, classify(err)
	}
	return sb, nil
}

// Connect returns a handle to a running sandbox.
func (p *Provider) Connect(ctx context.Context, id string) (driver.Sandbox, error) {
	sb, err := p.attach(ctx, id)
	if err != nil {
		return nil, err
	}
	return p.handle(sb), nil
}

// Delete terminates a running sandbox.
func (p *Provider) Delete(ctx context.Context, id string) error {
	sb, err := p.attach(ctx, id)
	if err != nil {
		return err
	}
	defer sb.Detach()
	return terminate(ctx, sb)
}

// terminate ends the sandbox and waits until Modal reports it ended, so that
// a Delete that returned is seen by every later call.
func terminate(ctx context.Context, sb *sdk.Sandbox) error {
	code, err := sb.Poll(ctx, nil)
	if err == nil && code != nil {
		return errdefs.Errorf(errdefs.NotFound, "sandbox has already ended (exit %d)", *code)
	}
	if err == nil {
		_, err = sb.Terminate(ctx, &sdk.SandboxTerminateParams{Wait: true})
	}
	return classify(err)
}

// List returns the running sandboxes of the app that carry every label.
func (p *Provider) List(ctx context.Context, labels map[string]string) ([]driver.Info, error) {
	app, err := p.appHandle(ctx)
	if err != nil {
		return nil, err
	}
	seq, err := p.client.Sandboxes.List(ctx, &sdk.SandboxListParams{AppID: app.AppID, Tags: labels})
	if err != nil {
		return nil, classify(err)
	}
	var out []driver.Info
	for sb, err := range seq {
		if err != nil {
			return nil, classify(err)
		}
		tags, err := sb.GetTags(ctx, nil)
		_ = sb.Detach()
		if err != nil {
			if errors.Is(classify(err), errdefs.ErrNotFound) {
				continue // ended while we listed
			}
			return nil, classify(err)
		}
		if !driver.MatchLabels(tags, labels) {
			continue
		}
		out = append(out, driver.Info{ID: sb.SandboxID, Labels: tags, State: "running"})
	}
	return out, nil
}
