package k8s

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"maps"
	"math"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/berth-sh/berth/agent/podagent"
	"github.com/berth-sh/berth/sandbox/driver"
)

// Labels and annotations berth puts on its objects.
const (
	// labelManaged marks every sandbox pod: the informer's selector.
	labelManaged = "berth.sh/sandbox"
	// labelNetwork names the NetworkPolicy that selects the pod.
	labelNetwork = "berth.sh/network"
	// annExpires is the TTL, RFC 3339; the reaper deletes a pod past it.
	annExpires = "berth.sh/expires-at"
	// annLabels holds every Spec label as JSON: the authority for List,
	// since Kubernetes label values are stricter than berth's.
	annLabels = "berth.sh/labels"
	// annMeta holds berth metadata that is not a label (user, workdir).
	annMeta = "berth.sh/meta"
)

// Container names.
const (
	containerSandbox = "sandbox"
	containerInstall = "berth-install"
	volumeAgent      = "berth-agent"
)

// newName returns a fresh sandbox ID, which is the pod's name.
func newName() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "berth-" + hex.EncodeToString(b)
}

// meta is what Connect and List need back from a sandbox's object.
type meta struct {
	User    string `json:"user,omitempty"`
	WorkDir string `json:"workdir,omitempty"`
	// Image is the sandbox's image (agent-sandbox mode: a claim names none).
	Image string `json:"image,omitempty"`
}

// podLabels returns the pod's labels: berth's own plus each Spec label that
// is also a valid Kubernetes label (the others live in annLabels only).
func podLabels(spec driver.Spec, network string) map[string]string {
	l := map[string]string{labelManaged: "true"}
	if network != "" {
		l[labelNetwork] = network
	}
	for k, v := range spec.Labels {
		if validLabel(k, v) {
			l[k] = v
		}
	}
	return l
}

func validLabel(k, v string) bool {
	return len(validation.IsQualifiedName(k)) == 0 && len(validation.IsValidLabelValue(v)) == 0 &&
		k != labelManaged && k != labelNetwork
}

// podFor builds the Pod of a sandbox. The sandbox container runs the berth
// binary (copied in by the initContainer, or an image volume) as PID 1,
// serving envd on podagent.Port; the token's hash is all the pod holds.
func (p *Provider) podFor(name string, spec driver.Spec, image string, tokenHash string, network string, now time.Time) (*corev1.Pod, error) {
	labelsJSON, err := json.Marshal(spec.Labels)
	if err != nil {
		return nil, err
	}
	metaJSON, _ := json.Marshal(meta{User: spec.User, WorkDir: spec.WorkDir})
	env := []corev1.EnvVar{{Name: podagent.EnvTokenSHA256, Value: tokenHash}}
	if spec.User != "" {
		env = append(env, corev1.EnvVar{Name: podagent.EnvUser, Value: spec.User})
	}
	if spec.WorkDir != "" {
		env = append(env, corev1.EnvVar{Name: podagent.EnvDir, Value: spec.WorkDir})
	}
	for _, k := range sortedKeys(spec.Env) {
		env = append(env, corev1.EnvVar{Name: k, Value: spec.Env[k]})
	}
	ps, err := p.podSpec(spec, image, env)
	if err != nil {
		return nil, err
	}
	deadline := int64(math.Ceil(p.opts.MaxLifetime.Seconds()))
	ps.ActiveDeadlineSeconds = &deadline
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: podLabels(spec, network),
			Annotations: map[string]string{
				annExpires: now.Add(spec.TTL).UTC().Format(time.RFC3339Nano),
				annLabels:  string(labelsJSON),
				annMeta:    string(metaJSON),
			},
		},
		Spec: ps,
	}, nil
}

// podSpec is the pod spec of a sandbox of spec whose container has env:
// everything but the backstop, which a warm pod (claims.go) cannot have.
func (p *Provider) podSpec(spec driver.Spec, image string, env []corev1.EnvVar) (corev1.PodSpec, error) {
	res, err := resources(spec.Resources)
	if err != nil {
		return corev1.PodSpec{}, err
	}
	grace := int64(1)
	no := false
	sc := &corev1.SecurityContext{
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		AllowPrivilegeEscalation: &no,
	}
	// runAsNonRoot where the image allows: berth cannot read an image's
	// USER here, so only a numeric non-zero Spec.User says it does.
	if uid, err := strconv.ParseInt(spec.User, 10, 64); err == nil && uid > 0 {
		yes := true
		sc.RunAsUser, sc.RunAsNonRoot = &uid, &yes
	}
	ps := corev1.PodSpec{
		RestartPolicy:                 corev1.RestartPolicyNever,
		AutomountServiceAccountToken:  &no,
		EnableServiceLinks:            &no,
		TerminationGracePeriodSeconds: &grace,
		NodeSelector:                  maps.Clone(p.opts.NodeSelector),
		Tolerations:                   append([]corev1.Toleration(nil), p.opts.Tolerations...),
		Containers: []corev1.Container{{
			Name:            containerSandbox,
			Image:           image,
			Command:         []string{podagent.BinaryPath, "k8s-agent"},
			Env:             env,
			Resources:       res,
			SecurityContext: sc,
			Ports:           []corev1.ContainerPort{{Name: "envd", ContainerPort: podagent.Port}},
			VolumeMounts:    []corev1.VolumeMount{{Name: volumeAgent, MountPath: podagent.BinaryDir, ReadOnly: true}},
		}},
	}
	if p.opts.RuntimeClassName != "" {
		rc := p.opts.RuntimeClassName
		ps.RuntimeClassName = &rc
	}
	if p.opts.AgentImageVolume {
		// The image's /berth appears as /.berth/berth.
		ps.Volumes = []corev1.Volume{{Name: volumeAgent, VolumeSource: corev1.VolumeSource{
			Image: &corev1.ImageVolumeSource{Reference: p.opts.AgentImage, PullPolicy: corev1.PullIfNotPresent},
		}}}
		return ps, nil
	}
	ps.Volumes = []corev1.Volume{{Name: volumeAgent, VolumeSource: corev1.VolumeSource{
		EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: resource.NewQuantity(128<<20, resource.BinarySI)},
	}}}
	ps.InitContainers = []corev1.Container{{
		Name:            containerInstall,
		Image:           p.opts.AgentImage,
		Command:         []string{"/berth", "k8s-agent", "--install", podagent.BinaryPath},
		SecurityContext: sc.DeepCopy(),
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("128Mi"),
		}},
		VolumeMounts: []corev1.VolumeMount{{Name: volumeAgent, MountPath: podagent.BinaryDir}},
	}}
	return ps, nil
}

// resources maps the Spec: requests always, limits too when it asks
// (ResourcesBoth). GPUs are nvidia.com/gpu, which Kubernetes takes as
// limits only.
func resources(r driver.Resources) (corev1.ResourceRequirements, error) {
	list := corev1.ResourceList{}
	if r.CPUs > 0 {
		list[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(math.Ceil(r.CPUs*1000)), resource.DecimalSI)
	}
	if r.MemoryMB > 0 {
		list[corev1.ResourceMemory] = *resource.NewQuantity(int64(r.MemoryMB)<<20, resource.BinarySI)
	}
	if r.StorageMB > 0 {
		list[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(int64(r.StorageMB)<<20, resource.BinarySI)
	}
	out := corev1.ResourceRequirements{}
	if len(list) > 0 {
		out.Requests = list
		if r.Limits {
			out.Limits = list.DeepCopy()
		}
	}
	if r.GPUs > 0 {
		if out.Limits == nil {
			out.Limits = corev1.ResourceList{}
		}
		out.Limits["nvidia.com/gpu"] = *resource.NewQuantity(int64(r.GPUs), resource.DecimalSI)
	}
	return out, nil
}

// specLabels reads a pod's Spec labels back.
func specLabels(pod *corev1.Pod) map[string]string {
	var l map[string]string
	if s, ok := pod.Annotations[annLabels]; ok {
		if err := json.Unmarshal([]byte(s), &l); err == nil {
			return l
		}
	}
	return map[string]string{}
}

// expiresAt reads the TTL annotation; ok is false when it is missing or
// unreadable (the reaper then leaves the pod to the backstop).
func expiresAt(pod *corev1.Pod) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339, pod.Annotations[annExpires])
	return t, err == nil
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slicesSort(ks)
	return ks
}
