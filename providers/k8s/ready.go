package k8s

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Waiting reasons that no amount of waiting fixes.
var fatalWaiting = map[string]bool{
	"ErrImagePull":               false, // retried by the kubelet; BackOff below is the verdict
	"ImagePullBackOff":           true,
	"ErrImageNeverPull":          true,
	"InvalidImageName":           true,
	"CreateContainerConfigError": true,
	"CreateContainerError":       true,
	"RunContainerError":          true,
}

// readiness says whether a sandbox pod is ready for its agent to be dialled.
// seen records that the cache has held the pod, so that a pod gone from
// it afterwards is reported as deleted rather than awaited.
type readiness struct {
	name  string
	seen  bool
	state string // the last reason it was not ready, for a timeout's text
}

func (r *readiness) check(pod *corev1.Pod) (bool, error) {
	if pod == nil {
		if r.seen {
			return false, errdefs.Errorf(errdefs.NotFound, "k8s: pod %s was deleted before it was ready", r.name)
		}
		r.state = "not yet seen by the informer"
		return false, nil
	}
	r.seen = true
	if pod.DeletionTimestamp != nil {
		return false, errdefs.Errorf(errdefs.NotFound, "k8s: pod %s is being deleted", r.name)
	}
	switch pod.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		return false, errdefs.Errorf(errdefs.Unavailable, "k8s: pod %s ended before it was ready (%s: %s %s)",
			r.name, pod.Status.Phase, pod.Status.Reason, pod.Status.Message)
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if w := cs.State.Waiting; w != nil && fatalWaiting[w.Reason] {
				what := "image " + cs.Image
				if cs.Name == containerInstall {
					what = "the agent image " + cs.Image + " (" + EnvAgentImage + ")"
				}
				return false, errdefs.Errorf(errdefs.InvalidArgument,
					"k8s: pod %s cannot start %s: %s: %s; images must come from a registry the cluster can pull (prebuilt task images go in %s)",
					r.name, what, w.Reason, w.Message, EnvImageMap)
			}
			if t := cs.State.Terminated; t != nil && cs.Name == containerSandbox {
				return false, errdefs.Errorf(errdefs.Unavailable, "k8s: pod %s: the agent exited %d (%s)", r.name, t.ExitCode, t.Reason)
			}
		}
	}
	if pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "" {
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.Name == containerSandbox && cs.State.Running != nil {
				return true, nil
			}
		}
	}
	r.state = describe(pod)
	return false, nil
}

// describe says where a pod is stuck (scheduling, pulling), for errors.
func describe(pod *corev1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
			return fmt.Sprintf("not scheduled: %s %s", c.Reason, c.Message)
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			return fmt.Sprintf("container %s waiting: %s %s", cs.Name, w.Reason, w.Message)
		}
	}
	return "phase " + string(pod.Status.Phase)
}
