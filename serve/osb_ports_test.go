package serve

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/serve/internal/servetest"
	"github.com/berth-sh/berth/serve/opensandbox"
)

// headerServer stands for a server in a sandbox of the fake backend (its
// sandboxes share the host's network): it answers mark and records the
// headers of each request it got.
type headerServer struct {
	port int
	mu   sync.Mutex
	got  []http.Header
}

func newHeaderServer(t *testing.T, mark string) *headerServer {
	hs := &headerServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hs.mu.Lock()
		hs.got = append(hs.got, r.Header.Clone())
		hs.mu.Unlock()
		fmt.Fprint(w, mark)
	}))
	t.Cleanup(srv.Close)
	hs.port = srv.Listener.Addr().(*net.TCPAddr).Port
	return hs
}

func (hs *headerServer) requests() []http.Header {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return append([]http.Header(nil), hs.got...)
}

// TestOpenSandboxPortsPrivate: an OpenSandbox sandbox's ports, reached
// through the E2B port routes (Host "<port>-<id>.<domain>" or the
// E2b-Sandbox-Id/-Port headers), answer only its owner's OpenSandbox key,
// its execd token (the endpoint lookup's header) or its traffic token (E2B
// connect's trafficAccessToken); without one, or with another key's or
// another sandbox's, the call is 403 and never reaches the sandbox, and no
// credential is passed on to it. The endpoint flow of the SDKs is
// unchanged. On 5553f78 every call here reached the sandbox's server and
// answered 200, credentials or none, and the owner's key and execd token
// were passed on to the sandbox.
func TestOpenSandboxPortsPrivate(t *testing.T) {
	e := newEnv(t, nil, nil)
	victim := e.OSBCreate(testKey, servetest.OSBImageBody(nil))
	attacker := e.OSBCreate(servetest.OtherKey, servetest.OSBImageBody(nil))
	_, vhdr := e.OSBEndpoint(testKey, victim.ID, opensandbox.ExecdPort)
	_, ahdr := e.OSBEndpoint(servetest.OtherKey, attacker.ID, opensandbox.ExecdPort)
	hs := newHeaderServer(t, "served-"+victim.ID)
	host := fmt.Sprintf("%d-%s.localhost", hs.port, victim.ID)
	byHeaders := map[string]string{e2bapi.SandboxIDHeader: victim.ID, e2bapi.SandboxPortHeader: fmt.Sprint(hs.port)}
	with := func(base map[string]string, k, v string) map[string]string {
		h := map[string]string{k: v}
		for bk, bv := range base {
			h[bk] = bv
		}
		return h
	}
	hostOnly := map[string]string{"Host": host}
	for name, hdr := range map[string]map[string]string{
		"no credentials, by host":            hostOnly,
		"no credentials, by headers":         byHeaders,
		"another key":                        with(hostOnly, opensandbox.APIKeyHeader, servetest.OtherKey),
		"another sandbox's execd token":      with(hostOnly, opensandbox.AccessTokenHeader, ahdr[opensandbox.AccessTokenHeader]),
		"the owner's key as the E2B key":     with(hostOnly, "X-API-KEY", testKey),
		"the execd token as a traffic token": with(hostOnly, e2bapi.TrafficAccessTokenHeader, vhdr[opensandbox.AccessTokenHeader]),
		"a made-up traffic token":            with(byHeaders, e2bapi.TrafficAccessTokenHeader, strings.Repeat("a", 64)),
	} {
		r := e.Call("GET", "/", "", nil, hdr)
		if r.Status != http.StatusForbidden || strings.Contains(string(r.Body), "served-") {
			t.Errorf("%s: %d %q, want 403", name, r.Status, r.Body)
		}
	}
	if n := len(hs.requests()); n != 0 {
		t.Fatalf("refused calls reached the sandbox's server %d times", n)
	}
	var c e2bapi.Sandbox
	if r := e.Call("POST", "/sandboxes/"+victim.ID+"/connect", testKey, map[string]any{"timeout": 60}, nil); r.Status != http.StatusOK && r.Status != http.StatusCreated {
		t.Fatalf("E2B connect of the OpenSandbox sandbox: %d %s", r.Status, r.Body)
	} else if r.JSON(t, &c); c.TrafficAccessToken == nil || len(*c.TrafficAccessToken) < 32 || *c.TrafficAccessToken == vhdr[opensandbox.AccessTokenHeader] {
		t.Fatalf("connect answered traffic token %v", c.TrafficAccessToken)
	}
	for name, hdr := range map[string]map[string]string{
		"the owner's key":   with(hostOnly, opensandbox.APIKeyHeader, testKey),
		"the execd token":   with(byHeaders, opensandbox.AccessTokenHeader, vhdr[opensandbox.AccessTokenHeader]),
		"the traffic token": with(hostOnly, e2bapi.TrafficAccessTokenHeader, *c.TrafficAccessToken),
	} {
		if r := e.Call("GET", "/", "", nil, hdr); r.Status != http.StatusOK || string(r.Body) != "served-"+victim.ID {
			t.Errorf("%s: %d %q", name, r.Status, r.Body)
		}
	}
	got := hs.requests()
	if len(got) != 3 {
		t.Fatalf("the sandbox's server got %d calls, want 3", len(got))
	}
	for _, h := range got {
		for _, k := range []string{opensandbox.APIKeyHeader, opensandbox.AccessTokenHeader, e2bapi.TrafficAccessTokenHeader} {
			if h.Get(k) != "" {
				t.Errorf("the sandbox got header %s", k)
			}
		}
	}
	// The SDKs' own flow: the endpoint's header opens execd.
	base, hdr := e.OSBEndpoint(testKey, victim.ID, opensandbox.ExecdPort)
	if r := e.Execd("GET", base, hdr, "", "/ping", nil); r.Status != http.StatusOK {
		t.Fatalf("ping through the endpoint: %d %s", r.Status, r.Body)
	}
}

// TestPortsTrafficTokenOnlyForE2B: an E2B sandbox with private ports takes
// only its traffic token, as E2B's edge does; the OpenSandbox credentials
// that open an OpenSandbox sandbox's ports do not open it.
func TestPortsTrafficTokenOnlyForE2B(t *testing.T) {
	e := newEnv(t, nil, nil)
	sb := e.Create(testKey, map[string]any{"templateID": "base", "timeout": 120, "network": map[string]any{"allowPublicTraffic": false}})
	hs := newHeaderServer(t, "private")
	host := fmt.Sprintf("%d-%s.localhost", hs.port, sb.SandboxID)
	for name, hdr := range map[string]map[string]string{
		"the owner's OpenSandbox key": {"Host": host, opensandbox.APIKeyHeader: testKey},
		"the envd token as execd's":   {"Host": host, opensandbox.AccessTokenHeader: sb.EnvdAccessToken},
	} {
		if r := e.Call("GET", "/", "", nil, hdr); r.Status != http.StatusForbidden {
			t.Errorf("%s: %d %q, want 403", name, r.Status, r.Body)
		}
	}
	if r := e.Call("GET", "/", "", nil, map[string]string{"Host": host, e2bapi.TrafficAccessTokenHeader: *sb.TrafficAccessToken}); r.Status != http.StatusOK || string(r.Body) != "private" {
		t.Fatalf("with the token: %d %q", r.Status, r.Body)
	}
}
