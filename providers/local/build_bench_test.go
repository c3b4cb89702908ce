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

// BenchmarkBuild is a build that misses the cache every time (one context
// file changes): a sandbox of the base, a COPY, a RUN, the commit.
func BenchmarkBuild(b *testing.B) {
	needRoot(b)
	p := sandbox.NewProvider("local", newDriver(b))
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(benchDockerfile), 0o644); err != nil {
		b.Fatal(err)
	}
	spec := sandbox.Spec{Build: &sandbox.Build{ContextDir: dir}}
	ctx := context.Background()
	b.Cleanup(func() { removeBuiltImages(b) })
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
	needRoot(b)
	p := sandbox.NewProvider("local", newDriver(b))
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(benchDockerfile), 0o644); err != nil {
		b.Fatal(err)
	}
	spec := sandbox.Spec{Build: &sandbox.Build{ContextDir: dir}}
	ctx := context.Background()
	b.Cleanup(func() { removeBuiltImages(b) })
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
