package testimage

import (
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
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
	return serve(t, images, func(h http.Handler) http.Handler { return h })
}

// ServeRedirecting is Serve with every blob download redirected (307) to
// base+path with a signature in the query (RedirectSignature), as
// registries send blobs to their storage: base names where a hostile
// registry would send the puller ("https://127.0.0.1:PORT").
func ServeRedirecting(t testing.TB, images map[string]v1.Image, base string) string {
	t.Helper()
	return serve(t, images, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
				http.Redirect(w, r, base+r.URL.Path+"?X-Amz-Signature="+RedirectSignature, http.StatusTemporaryRedirect)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
}

// RedirectSignature is the credential in ServeRedirecting's redirects,
// which no error or log may show.
const RedirectSignature = "test-signature-0d1e"

func serve(t testing.TB, images map[string]v1.Image, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(wrap(gcrregistry.New(gcrregistry.Logger(log.New(io.Discard, "", 0)))))
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

// Internal is a service on 127.0.0.1 that the host running berth reaches
// and a remote client must not, as an internal API or a cloud's metadata
// service: every request is answered 403 with Marker in the body (what
// such a service's answer would give away), and Accepts counts the
// connections it took, so a test can tell that none was made.
type Internal struct {
	Addr    string // host:port
	Marker  string
	accepts atomic.Int64
}

// Accepts returns how many connections the service accepted.
func (s *Internal) Accepts() int64 { return s.accepts.Load() }

// ServeInternal starts an Internal service until the test ends.
func ServeInternal(t testing.TB, marker string) *Internal {
	t.Helper()
	s := &Internal{Marker: marker}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, marker, http.StatusForbidden)
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.accepts.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	s.Addr = srv.Listener.Addr().String()
	return s
}
