package k8s_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"

	"github.com/berth-sh/berth/providers/k8s"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/sandbox"
)

// deployRole reads the Role named name from deploy/rbac.yaml.
func deployRole(t *testing.T, name string) rbacv1.Role {
	t.Helper()
	b, err := os.ReadFile("../../deploy/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var r rbacv1.Role
		if err := dec.Decode(&r); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if r.Kind == "Role" && r.Name == name {
			return r
		}
	}
	t.Fatalf("deploy/rbac.yaml has no Role %s", name)
	return rbacv1.Role{}
}

// bindRole gives user exactly the rules in a fresh namespace.
func bindRole(t *testing.T, rules []rbacv1.PolicyRule, user string) string {
	t.Helper()
	ns := namespace(t)
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "berth-sandboxes"}, Rules: rules}
	if _, err := cluster.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "berth-sandboxes"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "berth-sandboxes"},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: user}},
	}
	if _, err := cluster.Client.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return ns
}

// lifecycle is everything the provider does in a sandbox's life, as user
// cfg: open (the informer), create (the key Secret, the NetworkPolicy, the
// pod), exec (port-forward), set the TTL, connect to an unknown id (get),
// list, delete.
func lifecycle(cfg *rest.Config, ns string, mode k8s.Mode) error {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	o := options(ns)
	o.Kubeconfig, o.Config, o.Mode = "", cfg, mode
	octx, ocancel := context.WithTimeout(ctx, 10*time.Second)
	defer ocancel()
	d, err := k8s.New(octx, o)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	p := sandbox.NewProvider("k8s", d)
	defer p.Close()
	sb, err := p.Create(ctx, sandbox.Spec{Image: local.DefaultImage})
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	defer sb.Close()
	if res, err := sb.Run(ctx, sandbox.Command{Args: []string{"echo", "ok"}}); err != nil || strings.TrimSpace(string(res.Stdout)) != "ok" {
		return fmt.Errorf("exec: %q %w", res.Stdout, err)
	}
	if err := sb.SetTimeout(ctx, 5*time.Minute); err != nil {
		return fmt.Errorf("set timeout: %w", err)
	}
	if _, err := p.Connect(ctx, "berth-0000000000000000"); sandbox.ClassOf(err) != sandbox.NotFound {
		return fmt.Errorf("connect to an unknown sandbox: %v, want NotFound", err)
	}
	if infos, err := p.List(ctx, nil); err != nil || len(infos) != 1 {
		return fmt.Errorf("list: %v %w", infos, err)
	}
	if err := sb.Delete(ctx); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	return nil
}

// The Roles in deploy/rbac.yaml are the least that works: a sandbox's
// whole life passes with exactly a Role's rules, in its mode, and fails
// with any one verb removed.
func TestRBACRoleIsLeast(t *testing.T) {
	t.Run("pod", func(t *testing.T) {
		needCluster(t)
		roleIsLeast(t, deployRole(t, "berth-sandboxes"), k8s.ModePod)
	})
	t.Run("agent-sandbox", func(t *testing.T) {
		needAgentSandbox(t)
		roleIsLeast(t, deployRole(t, "berth-agent-sandbox"), k8s.ModeAgentSandbox)
	})
}

func roleIsLeast(t *testing.T, role rbacv1.Role, mode k8s.Mode) {
	user := "berth-rbac-test-" + string(mode)
	cfg, err := cluster.UserConfig(user)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("exact", func(t *testing.T) {
		t.Parallel()
		if err := lifecycle(cfg, bindRole(t, role.Rules, user), mode); err != nil {
			t.Fatalf("with exactly the deploy Role: %v", err)
		}
	})
	for i, rule := range role.Rules {
		for j, verb := range rule.Verbs {
			name := fmt.Sprintf("without-%s-%s", strings.Join(rule.Resources, ","), verb)
			if len(rule.ResourceNames) > 0 {
				name += "-named"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				rules := make([]rbacv1.PolicyRule, 0, len(role.Rules))
				for k, r := range role.Rules {
					r = *r.DeepCopy()
					if k == i {
						r.Verbs = slices.Delete(slices.Clone(r.Verbs), j, j+1)
						if len(r.Verbs) == 0 {
							continue
						}
					}
					rules = append(rules, r)
				}
				err := lifecycle(cfg, bindRole(t, rules, user), mode)
				if err == nil {
					t.Fatalf("the lifecycle passed without %s on %v: the Role grants more than it needs", verb, rule.Resources)
				}
				t.Logf("fails as it should: %v", err)
			})
		}
	}
}
