package testimage

import (
	"archive/tar"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// DockerTar writes images, keyed by tag, in `docker save` format
// (manifest.json, configs and layer blobs) to a test temp file and returns
// its path.
func DockerTar(t testing.TB, images map[string]v1.Image) string {
	t.Helper()
	refs := map[name.Reference]v1.Image{}
	for ref, img := range images {
		tag, err := name.NewTag(ref)
		if err != nil {
			t.Fatalf("testimage: tag %q: %v", ref, err)
		}
		refs[tag] = img
	}
	p := filepath.Join(t.TempDir(), "docker-save.tar")
	if err := tarball.MultiRefWriteToFile(p, refs); err != nil {
		t.Fatalf("testimage: docker tar: %v", err)
	}
	return p
}

// OCILayoutTar writes images as a tarred OCI image layout (oci-layout,
// index.json naming each image by its key in the ref.name annotation,
// blobs/) and returns the path.
func OCILayoutTar(t testing.TB, images map[string]v1.Image) string {
	t.Helper()
	dir := t.TempDir()
	lp, err := layout.Write(filepath.Join(dir, "layout"), empty.Index)
	if err != nil {
		t.Fatalf("testimage: layout: %v", err)
	}
	refs := make([]string, 0, len(images))
	for ref := range images {
		refs = append(refs, ref)
	}
	sort.Strings(refs)
	for _, ref := range refs {
		err = lp.AppendImage(images[ref], layout.WithAnnotations(map[string]string{
			"org.opencontainers.image.ref.name": ref,
		}))
		if err != nil {
			t.Fatalf("testimage: layout: %v", err)
		}
	}
	p := filepath.Join(dir, "oci-layout.tar")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	if err := tw.AddFS(os.DirFS(string(lp))); err != nil {
		t.Fatalf("testimage: tar layout: %v", err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}
