package k8s

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-sh/berth/sandbox/types"
)

// CreateUnbacked makes a sandbox's pod and waits for the informer to see it
// running, without dialling its agent: the scale benchmark's pods run on
// kwok nodes, which run no process. It is Create minus the data plane.
func CreateUnbacked(ctx context.Context, p *Provider, spec types.Spec) (string, error) {
	key, err := p.keys.get(ctx)
	if err != nil {
		return "", err
	}
	spec = spec.WithDefaults()
	name, err := p.createPod(ctx, spec, key)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	r := &readiness{name: name}
	err = p.w.until(ctx, name, func(pod *corev1.Pod) (bool, error) {
		if pod != nil && pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "" {
			return true, nil
		}
		return r.check(pod)
	})
	return name, err
}

// CachedPods is how many pods the process's informer holds for p.
func CachedPods(p *Provider) int {
	pods, _ := p.w.lister.List(everything)
	return len(pods)
}
