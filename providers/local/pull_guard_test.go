package local_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/berth-sh/berth/internal/testing/testimage"
	"github.com/berth-sh/berth/sandbox"
)

// A Spec's Pull policy guards its image's pull and a build's base: a
// loopback registry is refused (the detail in the provider's log, not in
// the error) unless the policy allows it; without a policy, as in
// TestPullOnCreate, it is pulled as before.
func TestGuardedPullOnCreate(t *testing.T) {
	needRoot(t)
	host := testimage.Serve(t, map[string]v1.Image{"guarded/busybox:1": testimage.Busybox(t)})
	ref := host + "/guarded/busybox:1"
	p, logs := loggedProvider(t)
	const refused = "refused: the registry's address is not public"
	_, err := p.Create(testCtx(t), sandbox.Spec{Image: ref, Pull: &sandbox.PullPolicy{}})
	if sandbox.ClassOf(err) != sandbox.InvalidArgument || !strings.Contains(err.Error(), refused) || strings.Contains(err.Error(), "127.0.0.0/8") {
		t.Fatalf("create under a policy: %v", err)
	}
	if !strings.Contains(logs.String(), "pulling an image a client named failed") || !strings.Contains(logs.String(), "127.0.0.0/8") {
		t.Errorf("the provider's log lacks the refusal's detail:\n%s", logs.String())
	}
	ctxDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte("FROM "+ref+"\nRUN true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = p.BuildImage(testCtx(t), sandbox.Spec{Build: &sandbox.Build{ContextDir: ctxDir}, Pull: &sandbox.PullPolicy{}}, nil)
	if sandbox.ClassOf(err) != sandbox.InvalidArgument || !strings.Contains(err.Error(), refused) {
		t.Fatalf("build under a policy: %v", err)
	}
	sb := create(t, p, sandbox.Spec{Image: ref, Pull: &sandbox.PullPolicy{Allow: []string{host}}})
	if got := sh(t, sb, "echo pulled"); got != "pulled" {
		t.Errorf("exec in the image pulled from the allowed registry: %q", got)
	}
}
