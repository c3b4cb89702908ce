package e2b_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/berth-sh/berth/providers/e2b"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/sandbox"
)

// keyCatcher is a server on another origin that records every key sent to
// it.
type keyCatcher struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newKeyCatcher(t *testing.T, headers ...string) *keyCatcher {
	k := &keyCatcher{}
	k.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.mu.Lock()
		for _, h := range headers {
			if v := r.Header.Get(h); v != "" {
				k.seen = append(k.seen, h+": "+v)
			}
		}
		k.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("[]"))
	}))
	t.Cleanup(k.Close)
	return k
}

func (k *keyCatcher) keys() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.seen...)
}

// TestKeyNeverCrossesARedirect is the attack: the control plane (or
// whoever answers in its name) redirects to another origin, on another
// port or another host name of the same machine. The key must not arrive
// there. net/http copies custom headers such as X-API-KEY onto every
// redirect, so on 6f9918d the catcher received the key: checked there,
// this test failed.
func TestKeyNeverCrossesARedirect(t *testing.T) {
	const key = "e2b_REDIRECT_SECRET_0123456789"
	catcher := newKeyCatcher(t, "X-Api-Key", "Authorization")
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/other-host"):
			// Same port, another host name: still another origin.
			http.Redirect(w, r, strings.Replace(catcher.URL, "127.0.0.1", "localhost", 1)+"/v2/sandboxes", http.StatusTemporaryRedirect)
		default:
			http.Redirect(w, r, catcher.URL+r.URL.Path, http.StatusTemporaryRedirect)
		}
	}))
	defer api.Close()
	for _, base := range []string{api.URL, api.URL + "/other-host"} {
		d, err := e2b.New(e2b.Options{APIKey: registry.Secret(key), APIURL: base, MaxRetries: -1})
		if err != nil {
			t.Fatal(err)
		}
		_, err = sandbox.NewProvider("e2b", d).List(testCtx(t), nil)
		d.Close()
		if err == nil {
			t.Errorf("%s: a redirect to another origin was followed to an answer", base)
		} else if strings.Contains(err.Error(), key) {
			t.Errorf("the error quotes the key: %v", err)
		}
	}
	if got := catcher.keys(); len(got) != 0 {
		t.Fatalf("the key reached another origin: %q", got)
	}
}
