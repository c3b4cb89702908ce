package daytona_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/berth-sh/berth/providers/daytona"
	"github.com/berth-sh/berth/registry"
)

// TestKeyNeverCrossesARedirect is the attack: the API (or whoever answers
// in its name) redirects to another port of the same host, or to another
// host name of it. net/http keeps the Authorization header on a redirect
// to the same host name whatever the port, so on 6f9918d the bearer key
// reached the other port: checked there, this test failed.
func TestKeyNeverCrossesARedirect(t *testing.T) {
	const key = "dtn_REDIRECT_SECRET_0123456789"
	var mu sync.Mutex
	var leaked []string
	catcher := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("Authorization"); v != "" {
			mu.Lock()
			leaked = append(leaked, r.Host+": "+v)
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"items":[]}`))
	}))
	defer catcher.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target := catcher.URL
		if strings.HasPrefix(r.URL.Path, "/byname") {
			target = strings.Replace(target, "127.0.0.1", "localhost", 1)
		}
		http.Redirect(w, r, target+"/api/sandbox", http.StatusTemporaryRedirect)
	}))
	defer api.Close()
	for _, base := range []string{api.URL + "/api", api.URL + "/byname/api"} {
		d, err := daytona.New(daytona.Options{BaseURL: base, APIKey: registry.Secret(key), RateLimitRetries: -1})
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.List(t.Context(), nil)
		d.Close()
		if err == nil {
			t.Errorf("%s: a redirect to another origin was followed to an answer", base)
		} else if strings.Contains(err.Error(), key) {
			t.Errorf("the error quotes the key: %v", err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(leaked) != 0 {
		t.Fatalf("the key reached another origin: %q", leaked)
	}
}
