package k8s

import (
	"context"
	"os"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/types"
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
	w    *watcher
	keys keyring
	nets netPolicies

	closeOnce sync.Once
}

// New connects to the cluster, starts (or shares) the process's pod
// informer on the namespace, and returns the driver.
func New(ctx context.Context, o Options) (*Provider, error) {
	if err := o.fill(); err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(o.Config)
	if err != nil {
		return nil, types.Errorf(types.InvalidArgument, "k8s: client: %w", err)
	}
	p := &Provider{opts: o, cs: cs}
	p.keys.p = p
	p.nets.p = p
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if p.w, err = acquireWatcher(sctx, cs, o.Config, o.Namespace); err != nil {
		return nil, err
	}
	return p, nil
}

// Capabilities: requests, or limits when the Spec asks; every network mode
// as a NetworkPolicy (enforced only where the cluster's CNI enforces
// NetworkPolicy); GPUs as nvidia.com/gpu; no image builds.
func (p *Provider) Capabilities() types.Capabilities { return capabilities(p.opts.MaxLifetime) }

func capabilities(maxLife time.Duration) types.Capabilities {
	return driver.Derive[*Provider, *sandboxHandle, *process](types.Capabilities{
		ResourceMode: types.ResourcesBoth,
		Networks:     []types.NetworkMode{types.NetworkNone, types.NetworkPublic, types.NetworkAllowlist},
		GPUs:         true,
		MaxTTL:       maxLife,
	})
}

// ProviderCapabilities are the default driver's capabilities, for the
// registry entry.
func ProviderCapabilities() types.Capabilities { return capabilities(DefaultMaxLifetime) }

// Namespace is where the driver's sandboxes live.
func (p *Provider) Namespace() string { return p.opts.Namespace }

// Clientset is the driver's API client (berth serve's cluster store).
func (p *Provider) Clientset() kubernetes.Interface { return p.cs }

// Close stops the informer when no other Provider of the process uses it.
func (p *Provider) Close() error {
	p.closeOnce.Do(func() { p.w.release() })
	return nil
}

// Create makes the pod and returns once its agent answers. A sandbox that fails half way is deleted before returning.
func (p *Provider) Create(ctx context.Context, spec types.Spec) (driver.Sandbox, error) {
	if spec.Build != nil {
		return nil, types.Errorf(types.NotSupported,
			"k8s: the cluster builds no images: push the task's image to a registry the cluster can pull and map it in %s", EnvImageMap)
	}
	key, err := p.keys.get(ctx)
	if err != nil {
		return nil, err
	}
	name, err := p.createPod(ctx, spec, key)
	if err != nil {
		return nil, err
	}
	h, err := p.ready(ctx, name, key)
	if err != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = p.Delete(dctx, name)
		return nil, err
	}
	return h, nil
}

// createPod creates the sandbox's pod and returns its name.
func (p *Provider) createPod(ctx context.Context, spec types.Spec, key []byte) (string, error) {
	net, err := p.nets.ensure(ctx, spec.Network)
	if err != nil {
		return "", err
	}
	name := newName()
	pod, err := p.podFor(name, spec, p.image(spec.Image), tokenHash(key, name), net, time.Now())
	if err != nil {
		return "", types.Errorf(types.InvalidArgument, "k8s: %w", err)
	}
	if _, err := p.cs.CoreV1().Pods(p.opts.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return "", p.classifyNS(err, "create pod")
	}
	return name, nil
}

// image maps a Spec image through the pre-built image map.
func (p *Provider) image(img string) string {
	if m, ok := p.opts.ImageMap[img]; ok {
		return m
	}
	return img
}

// ready waits on the informer for the pod to run and for its agent to
// answer, and returns the handle.
func (p *Provider) ready(ctx context.Context, name string, key []byte) (*sandboxHandle, error) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.ReadyTimeout)
	defer cancel()
	r := &readiness{name: name}
	if err := p.w.until(ctx, name, r.check); err != nil {
		if ctx.Err() != nil {
			return nil, types.Errorf(types.DeadlineExceeded, "k8s: pod %s not ready within %v (%s)", name, p.opts.ReadyTimeout, r.state)
		}
		return nil, err
	}
	h, err := p.handle(p.w.get(name), key)
	if err != nil {
		return nil, err
	}
	if err := h.waitAgent(ctx); err != nil {
		_ = h.Close()
		return nil, err
	}
	return h, nil
}

// Connect attaches to a live sandbox from its name, reading the informer's
// cache (one GET when the cache has not seen a pod another process just
// made).
func (p *Provider) Connect(ctx context.Context, id string) (driver.Sandbox, error) {
	pod, err := p.live(ctx, id)
	if err != nil {
		return nil, err
	}
	key, err := p.keys.get(ctx)
	if err != nil {
		return nil, err
	}
	return p.handle(pod, key)
}

// live returns the pod of a sandbox that is running and not expired;
// anything else is NotFound.
func (p *Provider) live(ctx context.Context, id string) (*corev1.Pod, error) {
	pod := p.w.get(id)
	if pod == nil {
		got, err := p.cs.CoreV1().Pods(p.opts.Namespace).Get(ctx, id, metav1.GetOptions{})
		if err != nil {
			return nil, p.classifyNS(err, "get pod")
		}
		if got.Labels[labelManaged] != "true" {
			return nil, types.Errorf(types.NotFound, "k8s: pod %s is not a berth sandbox", id)
		}
		pod = got
	}
	if gone(pod, time.Now()) {
		return nil, types.Errorf(types.NotFound, "k8s: sandbox %s has ended or expired", id)
	}
	return pod, nil
}

// gone: deleted, ended, or past its TTL (the reaper deletes it soon).
func gone(pod *corev1.Pod, now time.Time) bool {
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		return true
	}
	exp, ok := expiresAt(pod)
	return ok && !now.Before(exp)
}

// List reads the informer's cache: no API call.
func (p *Provider) List(_ context.Context, labels map[string]string) ([]types.Info, error) {
	pods, err := p.w.lister.List(everything)
	if err != nil {
		return nil, classify(err, "list pods")
	}
	now := time.Now()
	var out []types.Info
	for _, pod := range pods {
		if gone(pod, now) {
			continue
		}
		l := specLabels(pod)
		if !types.MatchLabels(l, labels) {
			continue
		}
		exp, _ := expiresAt(pod)
		img := ""
		if len(pod.Spec.Containers) > 0 {
			img = pod.Spec.Containers[0].Image
		}
		out = append(out, types.Info{
			ID: pod.Name, Image: img, Labels: l, State: string(pod.Status.Phase),
			CreatedAt: pod.CreationTimestamp.Time, ExpiresAt: exp,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Delete deletes the pod and waits until the informer has seen it go, so that List and Connect
// after Delete agree. A pod already being deleted is NotFound.
func (p *Provider) Delete(ctx context.Context, id string) error {
	if pod := p.w.get(id); pod != nil && pod.DeletionTimestamp != nil {
		return types.Errorf(types.NotFound, "k8s: sandbox %s is already being deleted", id)
	}
	if err := p.cs.CoreV1().Pods(p.opts.Namespace).Delete(ctx, id, metav1.DeleteOptions{}); err != nil {
		return p.classifyNS(err, "delete pod")
	}
	return p.w.until(ctx, id, func(pod *corev1.Pod) (bool, error) {
		return pod == nil || pod.DeletionTimestamp != nil, nil
	})
}

// Reap deletes every sandbox past its TTL annotation, and every pod the
// kubelet ended (activeDeadlineSeconds, a dead agent), from the cache.
func (p *Provider) Reap(ctx context.Context) ([]string, error) {
	pods, err := p.w.lister.List(everything)
	if err != nil {
		return nil, classify(err, "list pods")
	}
	now := time.Now()
	var ids []string
	var errs []error
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil || !gone(pod, now) {
			continue
		}
		if err := p.Delete(ctx, pod.Name); err != nil && types.ClassOf(err) != types.NotFound {
			errs = append(errs, err)
			continue
		}
		ids = append(ids, pod.Name)
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
		return types.Errorf(types.NotFound, "k8s: %s: namespace %s is being deleted: %w", what, p.opts.Namespace, err)
	}
	if apierrors.IsNotFound(err) {
		if s, ok := err.(apierrors.APIStatus); ok && s.Status().Details != nil && s.Status().Details.Kind == "namespaces" {
			return types.Errorf(types.NotFound, "k8s: %s: namespace %s does not exist: %w", what, p.opts.Namespace, err)
		}
	}
	return classify(err, what)
}
