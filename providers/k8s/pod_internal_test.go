package k8s

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-sh/berth/agent/podagent"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// The pod of a sandbox: no restarts, no service-account token, seccomp
// RuntimeDefault, requests (and limits when asked) from the Spec, the
// runtime class, labels split into valid pod labels and the annotation,
// and the token's hash, never the token, in its spec.
func TestPodFor(t *testing.T) {
	p := &Provider{opts: Options{MaxLifetime: 2 * time.Hour, AgentImage: "reg/agent:1", RuntimeClassName: "gvisor"}}
	key := []byte(strings.Repeat("k", 32))
	spec := driver.Spec{
		Image: "reg/task:1", TTL: time.Hour, User: "1000", WorkDir: "/w",
		Env:       map[string]string{"A": "1"},
		Labels:    map[string]string{"berth.job": "j1", "note": "has spaces, not a k8s label"},
		Resources: driver.Resources{CPUs: 1.5, MemoryMB: 512, Limits: true},
	}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	pod, err := p.podFor("berth-1", spec, "reg/task:1", tokenHash(key, "berth-1"), "none-x", now)
	if err != nil {
		t.Fatal(err)
	}
	ps := pod.Spec
	if ps.RestartPolicy != corev1.RestartPolicyNever || *ps.AutomountServiceAccountToken || *ps.EnableServiceLinks {
		t.Errorf("restart %s automount %v links %v", ps.RestartPolicy, *ps.AutomountServiceAccountToken, *ps.EnableServiceLinks)
	}
	if *ps.ActiveDeadlineSeconds != 7200 || *ps.RuntimeClassName != "gvisor" {
		t.Errorf("deadline %d runtime %v", *ps.ActiveDeadlineSeconds, *ps.RuntimeClassName)
	}
	c := ps.Containers[0]
	if c.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault || *c.SecurityContext.AllowPrivilegeEscalation ||
		!*c.SecurityContext.RunAsNonRoot || *c.SecurityContext.RunAsUser != 1000 {
		t.Errorf("security context %+v", c.SecurityContext)
	}
	if got := c.Resources.Requests[corev1.ResourceCPU]; got.Cmp(resource.MustParse("1500m")) != 0 {
		t.Errorf("cpu request %v", got.String())
	}
	if got := c.Resources.Limits[corev1.ResourceMemory]; got.Cmp(resource.MustParse("512Mi")) != 0 {
		t.Errorf("memory limit %v", got.String())
	}
	if c.Command[0] != podagent.BinaryPath || ps.InitContainers[0].Image != "reg/agent:1" {
		t.Errorf("agent: %v from %s", c.Command, ps.InitContainers[0].Image)
	}
	tok := token(key, "berth-1")
	for _, e := range c.Env {
		if strings.Contains(e.Value, tok) {
			t.Errorf("the pod spec holds the access token in %s", e.Name)
		}
	}
	if pod.Labels["berth.job"] != "j1" || pod.Labels[labelManaged] != "true" || pod.Labels[labelNetwork] != "none-x" {
		t.Errorf("labels %v", pod.Labels)
	}
	if _, ok := pod.Labels["note"]; ok {
		t.Errorf("an invalid label value became a pod label")
	}
	if l := specLabels(pod); l["note"] != spec.Labels["note"] {
		t.Errorf("labels from the annotation: %v", l)
	}
	if exp, ok := expiresAt(pod); !ok || !exp.Equal(now.Add(time.Hour)) {
		t.Errorf("expiry %v %v", exp, ok)
	}
	// A root or named user leaves runAsNonRoot unset: the image decides.
	spec.User = "root"
	pod, _ = p.podFor("berth-2", spec, "x", "h", "", now)
	if pod.Spec.Containers[0].SecurityContext.RunAsNonRoot != nil {
		t.Errorf("runAsNonRoot set for user root")
	}
}

// One policy per setting: the same allowlist in another order is the same
// policy; none has no egress rule at all.
func TestPolicyFor(t *testing.T) {
	a, err := policyFor(driver.Network{Mode: driver.NetworkAllowlist, Allow: []string{"10.1.0.0/16", "192.0.2.7"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := policyFor(driver.Network{Mode: driver.NetworkAllowlist, Allow: []string{"192.0.2.7", "10.1.0.0/16"}})
	if a.Name != b.Name || len(a.Spec.Egress) != 2 || a.Spec.Egress[1].To[0].IPBlock.CIDR != "10.1.0.0/16" {
		t.Errorf("allowlist policies %s %s %+v", a.Name, b.Name, a.Spec.Egress)
	}
	n, _ := policyFor(driver.Network{Mode: driver.NetworkNone})
	if len(n.Spec.Egress) != 0 || n.Name == a.Name {
		t.Errorf("none policy %+v", n.Spec)
	}
	if _, err := policyFor(driver.Network{Mode: driver.NetworkAllowlist, Allow: []string{"10.0.0.0/99"}}); errdefs.ClassOf(err) != errdefs.InvalidArgument {
		t.Errorf("bad CIDR: %v", err)
	}
}
