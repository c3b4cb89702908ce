package local_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/sandbox"
)

const benchDockerfile = `FROM berth.local/busybox:latest
WORKDIR /app
COPY . /app/
RUN echo built > /app/built
`

// buildBench is a provider and a build context holding benchDockerfile;
// the images built from it are removed when b ends.
func buildBench(b *testing.B) (*sandbox.Provider, string, sandbox.Spec) {
	needRoot(b)
	p := sandbox.NewProvider("local", newDriver(b))
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(benchDockerfile), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { removeBuiltImages(b) })
	return p, dir, sandbox.Spec{Build: &sandbox.Build{ContextDir: dir}}
}

// BenchmarkBuild is a build that misses the cache every time (one context
// file changes): a sandbox of the base, a COPY, a RUN, the commit.
func BenchmarkBuild(b *testing.B) {
	p, dir, spec := buildBench(b)
	ctx := context.Background()
	before := local.BuildSandboxes()
	for i := 0; b.Loop(); i++ {
		if err := os.WriteFile(filepath.Join(dir, "n"), []byte(strconv.Itoa(i)), 0o644); err != nil {
			b.Fatal(err)
		}
		if err := p.PrepareImage(ctx, spec); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(local.BuildSandboxes()-before)/float64(b.N), "sandboxes/op")
}

// BenchmarkBuildCacheHit is PrepareImage of a stored build: parse, digest
// the context, find the image; no sandbox.
func BenchmarkBuildCacheHit(b *testing.B) {
	p, _, spec := buildBench(b)
	ctx := context.Background()
	if err := p.PrepareImage(ctx, spec); err != nil {
		b.Fatal(err)
	}
	before := local.BuildSandboxes()
	for b.Loop() {
		if err := p.PrepareImage(ctx, spec); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(local.BuildSandboxes()-before)/float64(b.N), "sandboxes/op")
}
