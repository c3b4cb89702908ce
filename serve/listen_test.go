package serve

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/internal/apikeys"
	"github.com/berth-sh/berth/serve/internal/servetest"
)

func TestListenAndServe(t *testing.T) {
	p := openFake(t, nil)
	keys, err := apikeys.New(testKey)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	urls := make(chan URLs, 1)
	done := make(chan error, 1)
	go func() {
		done <- ListenAndServe(ctx, "127.0.0.1:0", Options{Provider: p, Keys: keys, BaseImage: "host", Domain: "sb.example.com"}, func(u URLs) { urls <- u })
	}()
	var u URLs
	select {
	case u = <-urls:
	case err := <-done:
		t.Fatal(err)
	}
	if !strings.HasPrefix(u.APIURL, "http://127.0.0.1:") || u.SandboxURL != u.APIURL || u.Domain != "sb.example.com" {
		t.Fatalf("urls %+v", u)
	}
	if ex := u.Exports(); !strings.Contains(ex, "export E2B_API_URL="+u.APIURL+"\n") || !strings.Contains(ex, "export E2B_DOMAIN=sb.example.com\n") {
		t.Fatalf("exports %q", ex)
	}
	e := &servetest.Env{T: t, P: p, URL: u.APIURL}
	sb := e.Create(testKey, nil)
	if sb.Domain == nil || *sb.Domain != "sb.example.com" {
		t.Fatalf("domain %v", sb.Domain)
	}
	// Host routing with the configured domain.
	r := e.Call("GET", "/health", "", nil, map[string]string{"Host": e2bapi.EnvdPort + "-" + sb.SandboxID + ".sb.example.com"})
	if r.Status != http.StatusNoContent {
		t.Fatalf("envd health by host: %d", r.Status)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !e.BackendGone(sb.SandboxID) {
		t.Fatal("the sandbox outlived the server")
	}
}
