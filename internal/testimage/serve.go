package testimage

import (
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	gcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Serve starts an in-memory OCI registry on 127.0.0.1 for the test's
// lifetime, pushes images to it (keys are "repo:tag" or "repo") and returns
// its host:port, so that "HOST/repo:tag" pulls like any image.
func Serve(t testing.TB, images map[string]v1.Image) string {
	t.Helper()
	srv := httptest.NewServer(gcrregistry.New(gcrregistry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	for ref, img := range images {
		r, err := name.ParseReference(host+"/"+ref, name.Insecure)
		if err != nil {
			t.Fatalf("testimage: serve %q: %v", ref, err)
		}
		if err := remote.Write(r, img); err != nil {
			t.Fatalf("testimage: push %s: %v", r, err)
		}
	}
	return host
}
