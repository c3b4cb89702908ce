package k8s

import (
	"context"
	"os"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"

	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

var (
	_ driver.Provider = (*Provider)(nil)
	_ driver.Reaper   = (*Provider)(nil)
)

var getenv = os.Getenv

// Provider is the Kubernetes driver.
type Provider struct {
	opts Options
	cs   kubernetes.Interface
	m    mode
	keys keyring
	nets netPolicies

	closeOnce sync.Once
}

// mode is how sandboxes are made and followed: one plain Pod each
// (pods.go), or an agent-sandbox SandboxClaim each (claims.go). Both read
// one informer and never poll a sandbox.
type mode interface {
	// create makes the sandbox's objects and returns its ID.
	create(ctx context.Context, spec driver.Spec, key []byte) (string, error)
	// ready waits for the sandbox's pod to run and says where its agent is.
	ready(ctx context.Context, id string) (target, error)
	// live returns a running sandbox before its TTL; anything else is
	// NotFound.
	live(ctx context.Context, id string) (target, error)
	// list reads the informer's cache: no API call.
	list(labels map[string]string, now time.Time) []driver.Info
	// delete deletes the sandbox and waits for the cache to see it going;
	// one already going is NotFound.
	delete(ctx context.Context, id string) error
	// ended lists the sandboxes past their TTL, or whose pod ended, that
	// are not being deleted yet.
	ended(now time.Time) []string
	// setExpiry moves the sandbox's TTL to at.
	setExpiry(ctx context.Context, id string, at time.Time) error
	// gone blocks until the sandbox goes and says why, "" when ctx ends
	// first.
	gone(ctx context.Context, id string) string
	// cached is how many sandboxes the informer holds.
	cached() int
	close()
}

// target is where a sandbox's agent runs.
type target struct {
	id, pod, podIP string
	user           string
	// poolToken, when set, is the token of a warm pod's agent that has yet
	// to take its sandbox's settings (agent-sandbox mode).
	poolToken string
	// fwd, when set, is a port-forward to pod already dialling (a warm
	// claim's, opened while the controller finished the claim).
	fwd *forwarder
}

// New connects to the cluster, starts (or shares) the process's informer
// on the namespace, and returns the driver.
func New(ctx context.Context, o Options) (*Provider, error) {
	if err := o.fill(); err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(o.Config)
	if err != nil {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "k8s: client: %w", err)
	}
	p := &Provider{opts: o, cs: cs}
	p.keys.p = p
	p.nets.p = p
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if o.Mode == ModeAgentSandbox {
		p.m, err = newClaimMode(sctx, p)
	} else {
		p.m, err = newPodMode(sctx, p)
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Capabilities: requests, or limits when the Spec asks; every network mode
// as a NetworkPolicy (enforced only where the cluster's CNI enforces
// NetworkPolicy); GPUs as nvidia.com/gpu; no image builds. Sandboxes, their
// labels and TTLs live in the cluster, where every process sees them.
func (p *Provider) Capabilities() driver.Capabilities { return capabilities(p.opts.MaxLifetime) }

func capabilities(maxLife time.Duration) driver.Capabilities {
	return driver.Derive[*Provider, *sandboxHandle, *process](driver.Capabilities{
		ResourceMode: driver.ResourcesBoth,
		Networks:     []driver.NetworkMode{driver.NetworkNone, driver.NetworkPublic, driver.NetworkAllowlist},
		GPUs:         true,
		MaxTTL:       maxLife,
		SharedState:  true,
		Ports:        []driver.PortProtocol{driver.PortHTTP, driver.PortTCP},
	})
}

// ProviderCapabilities are the default driver's capabilities, for the
// registry entry.
func ProviderCapabilities() driver.Capabilities { return capabilities(DefaultMaxLifetime) }

// Namespace is where the driver's sandboxes live.
func (p *Provider) Namespace() string { return p.opts.Namespace }

// Clientset is the driver's API client.
func (p *Provider) Clientset() kubernetes.Interface { return p.cs }

// Close stops the informer when no other Provider of the process uses it.
func (p *Provider) Close() error {
	p.closeOnce.Do(p.m.close)
	return nil
}

// Create makes the sandbox and returns once its agent answers. A sandbox
// that fails half way is deleted before returning.
func (p *Provider) Create(ctx context.Context, spec driver.Spec) (driver.Sandbox, error) {
	if spec.Build != nil {
		return nil, errdefs.Errorf(errdefs.NotSupported,
			"k8s: the cluster builds no images: push the task's image to a registry the cluster can pull and map it in %s", EnvImageMap)
	}
	key, err := p.keys.get(ctx)
	if err != nil {
		return nil, err
	}
	id, err := p.m.create(ctx, spec, key)
	if err != nil {
		return nil, err
	}
	h, err := p.start(ctx, id, key, spec)
	if err != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = p.Delete(dctx, id)
		return nil, err
	}
	return h, nil
}

// start waits for the sandbox to be ready and its agent to answer, hands a
// warm pod's agent its sandbox's settings, and returns the handle.
func (p *Provider) start(ctx context.Context, id string, key []byte, spec driver.Spec) (*sandboxHandle, error) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.ReadyTimeout)
	defer cancel()
	t, err := p.m.ready(ctx, id)
	if err != nil {
		return nil, err
	}
	h, err := p.handle(t, key)
	if err != nil {
		return nil, err
	}
	if err := h.waitAgent(ctx); err != nil {
		_ = h.Close()
		return nil, err
	}
	if t.poolToken != "" {
		if err := h.claimAgent(ctx, t.poolToken, spec); err != nil {
			_ = h.Close()
			return nil, err
		}
	}
	return h, nil
}

// image maps a Spec image through the pre-built image map.
func (p *Provider) image(img string) string {
	if m, ok := p.opts.ImageMap[img]; ok {
		return m
	}
	return img
}

// Connect attaches to a live sandbox from its ID, reading the informer's
// cache (one GET when the cache has not seen a sandbox another process
// just made).
func (p *Provider) Connect(ctx context.Context, id string) (driver.Sandbox, error) {
	t, err := p.m.live(ctx, id)
	if err != nil {
		return nil, err
	}
	key, err := p.keys.get(ctx)
	if err != nil {
		return nil, err
	}
	return p.handle(t, key)
}

// List reads the informer's cache: no API call.
func (p *Provider) List(_ context.Context, labels map[string]string) ([]driver.Info, error) {
	out := p.m.list(labels, time.Now())
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Delete deletes the sandbox and waits until the informer has seen it go,
// so that List and Connect after Delete agree. A sandbox already being
// deleted is NotFound.
func (p *Provider) Delete(ctx context.Context, id string) error {
	return p.m.delete(ctx, id)
}

// Reap deletes every sandbox past its TTL, and every one whose pod ended
// (activeDeadlineSeconds, a dead agent), from the cache.
func (p *Provider) Reap(ctx context.Context) ([]string, error) {
	var ids []string
	var errs []error
	for _, id := range p.m.ended(time.Now()) {
		if err := p.Delete(ctx, id); err != nil && errdefs.ClassOf(err) != errdefs.NotFound {
			errs = append(errs, err)
			continue
		}
		ids = append(ids, id)
	}
	sort.Strings(ids)
	if len(errs) > 0 {
		return ids, errs[0]
	}
	return ids, nil
}

// classifyNS classifies err, saying so when the namespace itself is gone or
// going (a namespace deleted under a running job).
func (p *Provider) classifyNS(err error, what string) error {
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return errdefs.Errorf(errdefs.NotFound, "k8s: %s: namespace %s is being deleted: %w", what, p.opts.Namespace, err)
	}
	if apierrors.IsNotFound(err) {
		if s, ok := err.(apierrors.APIStatus); ok && s.Status().Details != nil && s.Status().Details.Kind == "namespaces" {
			return errdefs.Errorf(errdefs.NotFound, "k8s: %s: namespace %s does not exist: %w", what, p.opts.Namespace, err)
		}
	}
	return classify(err, what)
}
