package local_test

import (
	"strings"
	"testing"

	"github.com/berth-sh/berth/internal/syncbuf"
	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/sandbox"
)

// TestBuildImage: BuildImage (driver.ImageBuilder) builds a context apart
// from any sandbox and returns a reference Create runs; its log gets each
// step and what RUN prints; RUN --user runs one step as that user and
// leaves the next as it was; building it again is a cache hit that starts
// no sandbox.
func TestBuildImage(t *testing.T) {
	p, _ := buildProvider(t)
	buildStore(t) // removes the built image after, which the other build tests look for by name
	dir := writeContext(t, map[string]string{"Dockerfile": "FROM " + local.DefaultImage + "\n" +
		"RUN --user=nobody [\"/bin/sh\", \"-c\", \"echo printed by the step; id -u > /tmp/step-uid\"]\n" +
		"RUN id -u > /tmp/next-uid\n"})
	spec := sandbox.Spec{Build: &sandbox.Build{ContextDir: dir}}
	before := local.BuildSandboxes()
	var out syncbuf.Buffer
	ref, err := p.BuildImage(testCtx(t), spec, &out)
	if err != nil {
		t.Fatalf("build: %v\n%s", err, out.String())
	}
	if !strings.HasPrefix(ref, "berth.build/ctx:") {
		t.Fatalf("ref %q", ref)
	}
	for _, want := range []string{"Dockerfile:2: RUN --user=nobody", "printed by the step\n", "Dockerfile:3: RUN id -u"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("no %q in the build's log:\n%s", want, out.String())
		}
	}
	sb := createBuilt(t, p, sandbox.Spec{Image: ref})
	res, err := sb.Run(testCtx(t), sandbox.Command{Args: []string{"cat", "/tmp/step-uid", "/tmp/next-uid"}})
	if err != nil || string(res.Stdout) != "65534\n0\n" {
		t.Fatalf("uids %q %v %s", res.Stdout, err, res.Stderr)
	}
	var again syncbuf.Buffer
	ref2, err := p.BuildImage(testCtx(t), spec, &again)
	if err != nil || ref2 != ref || !strings.Contains(again.String(), "no build needed") {
		t.Fatalf("second build: %q %v\n%s", ref2, err, again.String())
	}
	if n := local.BuildSandboxes() - before; n != 1 {
		t.Fatalf("%d build sandboxes, want 1: the second build is a cache hit", n)
	}
	if _, err := p.BuildImage(testCtx(t), sandbox.Spec{Image: local.DefaultImage}, nil); sandbox.ClassOf(err) != sandbox.InvalidArgument {
		t.Fatalf("BuildImage without a build: %v", err)
	}
}
