package k8s

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// podMode is the default mode: each sandbox is one plain Pod, named by the
// sandbox's ID, followed through the process's pod informer.
type podMode struct {
	p *Provider
	w *watcher[*corev1.Pod]
}

func newPodMode(ctx context.Context, p *Provider) (*podMode, error) {
	w, err := acquireWatcher[*corev1.Pod](ctx, "pods", p.opts.Config, p.opts.Namespace, func() cache.SharedIndexInformer {
		inf := coreinformers.NewFilteredPodInformer(p.cs, p.opts.Namespace, 0,
			cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, managedOnly)
		_ = inf.SetTransform(trimPod)
		return inf
	})
	if err != nil {
		return nil, err
	}
	return &podMode{p: p, w: w}, nil
}

func (m *podMode) close() { m.w.release() }

func (m *podMode) cached() int { return len(m.w.list()) }

// trimPod drops what berth never reads, to keep a 10,000-pod cache small.
func trimPod(o any) (any, error) {
	if p, ok := o.(*corev1.Pod); ok {
		p.ManagedFields = nil
		p.Spec.Volumes = nil
		p.Spec.InitContainers = nil
		for i := range p.Spec.Containers {
			p.Spec.Containers[i].Env = nil
		}
	}
	return o, nil
}

// create makes the sandbox's pod and returns its name, the sandbox's ID.
func (m *podMode) create(ctx context.Context, spec driver.Spec, key []byte) (string, error) {
	p := m.p
	net, err := p.nets.ensure(ctx, spec.Network)
	if err != nil {
		return "", err
	}
	name := newName()
	pod, err := p.podFor(name, spec, p.image(spec.Image), tokenHash(key, name), net, time.Now())
	if err != nil {
		return "", errdefs.Errorf(errdefs.InvalidArgument, "k8s: %w", err)
	}
	if _, err := p.cs.CoreV1().Pods(p.opts.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return "", p.classifyNS(err, "create pod")
	}
	return name, nil
}

// ready waits on the informer for the pod to run.
func (m *podMode) ready(ctx context.Context, id string) (target, error) {
	r := &readiness{name: id}
	if err := m.w.until(ctx, id, r.check); err != nil {
		if ctx.Err() != nil {
			return target{}, errdefs.Errorf(errdefs.DeadlineExceeded, "k8s: pod %s not ready within %v (%s)", id, m.p.opts.ReadyTimeout, r.state)
		}
		return target{}, err
	}
	return podTarget(m.w.get(id)), nil
}

func podTarget(pod *corev1.Pod) target {
	var md meta
	_ = json.Unmarshal([]byte(pod.Annotations[annMeta]), &md)
	return target{id: pod.Name, pod: pod.Name, podIP: pod.Status.PodIP, user: md.User}
}

// live reads the cache (one GET when the cache has not seen a pod another
// process just made).
func (m *podMode) live(ctx context.Context, id string) (target, error) {
	pod, err := m.livePod(ctx, id)
	if err != nil {
		return target{}, err
	}
	return podTarget(pod), nil
}

func (m *podMode) livePod(ctx context.Context, id string) (*corev1.Pod, error) {
	pod := m.w.get(id)
	if pod == nil {
		got, err := m.p.cs.CoreV1().Pods(m.p.opts.Namespace).Get(ctx, id, metav1.GetOptions{})
		if err != nil {
			return nil, m.p.classifyNS(err, "get pod")
		}
		if got.Labels[labelManaged] != "true" {
			return nil, errdefs.Errorf(errdefs.NotFound, "k8s: pod %s is not a berth sandbox", id)
		}
		pod = got
	}
	if podGone(pod, time.Now()) {
		return nil, errdefs.Errorf(errdefs.NotFound, "k8s: sandbox %s has ended or expired", id)
	}
	return pod, nil
}

// podGone: deleted, ended, or past its TTL (the reaper deletes it soon).
func podGone(pod *corev1.Pod, now time.Time) bool {
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		return true
	}
	exp, ok := expiresAt(pod)
	return ok && !now.Before(exp)
}

func (m *podMode) list(labels map[string]string, now time.Time) []driver.Info {
	var out []driver.Info
	for _, pod := range m.w.list() {
		if podGone(pod, now) || !labelsMatch(pod.Labels, labels) {
			continue
		}
		l := specLabels(pod)
		if !driver.MatchLabels(l, labels) {
			continue
		}
		exp, _ := expiresAt(pod)
		img := ""
		if len(pod.Spec.Containers) > 0 {
			img = pod.Spec.Containers[0].Image
		}
		out = append(out, driver.Info{
			ID: pod.Name, Image: img, Labels: l, State: string(pod.Status.Phase),
			CreatedAt: pod.CreationTimestamp.Time, ExpiresAt: exp,
		})
	}
	return out
}

// labelsMatch is a cheap first look at an object's own labels (a pod's,
// or a claim's): a wanted label that is also a valid Kubernetes label is
// one of them, so an object without it is no match, whatever its
// annotation holds.
func labelsMatch(have, want map[string]string) bool {
	for k, v := range want {
		if validLabel(k, v) && have[k] != v {
			return false
		}
	}
	return true
}

func (m *podMode) delete(ctx context.Context, id string) error {
	if pod := m.w.get(id); pod != nil && pod.DeletionTimestamp != nil {
		return errdefs.Errorf(errdefs.NotFound, "k8s: sandbox %s is already being deleted", id)
	}
	if err := m.p.cs.CoreV1().Pods(m.p.opts.Namespace).Delete(ctx, id, metav1.DeleteOptions{}); err != nil {
		return m.p.classifyNS(err, "delete pod")
	}
	return m.w.until(ctx, id, func(pod *corev1.Pod) (bool, error) {
		return pod == nil || pod.DeletionTimestamp != nil, nil
	})
}

func (m *podMode) ended(now time.Time) []string {
	var ids []string
	for _, pod := range m.w.list() {
		if pod.DeletionTimestamp == nil && podGone(pod, now) {
			ids = append(ids, pod.Name)
		}
	}
	return ids
}

// setExpiry rewrites the TTL annotation (one PATCH). The kubelet's
// backstop, activeDeadlineSeconds, cannot be raised on a live pod, so a
// deadline past it is refused.
func (m *podMode) setExpiry(ctx context.Context, id string, at time.Time) error {
	pod, err := m.livePod(ctx, id)
	if err != nil {
		return err
	}
	if pod.Spec.ActiveDeadlineSeconds != nil {
		start := pod.CreationTimestamp.Time
		if pod.Status.StartTime != nil {
			start = pod.Status.StartTime.Time
		}
		if limit := start.Add(time.Duration(*pod.Spec.ActiveDeadlineSeconds) * time.Second); at.After(limit) {
			return errdefs.Errorf(errdefs.InvalidArgument,
				"k8s set timeout: %s is past the pod's backstop (activeDeadlineSeconds, %s); raise the provider's max lifetime", at.Format(time.RFC3339), limit.Format(time.RFC3339))
		}
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{annExpires: at.UTC().Format(time.RFC3339Nano)}}})
	_, err = m.p.cs.CoreV1().Pods(m.p.opts.Namespace).Patch(ctx, id, k8stypes.MergePatchType, patch, metaPatchOpts)
	return m.p.classifyNS(err, "set the ttl annotation")
}

// unseenGrace is how long a handle waits for the cache to show a sandbox
// it was given before it takes it for gone.
const unseenGrace = 30 * time.Second

func (m *podMode) gone(ctx context.Context, id string) string {
	var why string
	seen, start := false, time.Now()
	err := m.w.until(ctx, id, func(pod *corev1.Pod) (bool, error) {
		switch {
		case pod == nil && !seen && time.Since(start) < unseenGrace:
			// Connect may have read a pod (GET) that the cache has yet to see.
			return false, nil
		case pod == nil:
			why = "its pod was deleted"
		case pod.DeletionTimestamp != nil:
			why = "its pod is being deleted"
		case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
			why = fmt.Sprintf("its pod ended (%s %s)", pod.Status.Reason, pod.Status.Message)
		default:
			seen = true
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return ""
	}
	return why
}
