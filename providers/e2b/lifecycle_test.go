package e2b_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/syncbuf"

	"github.com/berth-sh/berth/providers/e2b"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/sandbox"
)

// waitFor polls cond until it holds or the test's minute runs out.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// An open handle re-arms the TTL every TTL/6, so its sandbox outlives the
// TTL; a closed handle stops, and so does one whose caller set the
// deadline with SetTimeout.
func TestKeepalive(t *testing.T) {
	t.Parallel()
	f := newFake(t, fakeOptions{})
	p := openProvider(t, f, nil)
	ctx := testCtx(t)
	const ttl = time.Second
	held, err := p.Create(ctx, sandbox.Spec{Image: "base", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	dropped, err := p.Create(ctx, sandbox.Spec{Image: "base", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := dropped.Close(); err != nil {
		t.Fatal(err)
	}
	// Past two TTLs: the held sandbox is there, the dropped one is gone.
	waitFor(t, ctx, "two TTLs", func() bool { return time.Since(start) > 2*ttl+200*time.Millisecond })
	if !f.has(held.ID()) {
		t.Fatal("the held sandbox expired while its handle was open")
	}
	if f.has(dropped.ID()) {
		t.Fatal("the closed handle's sandbox outlived its TTL: the keep-alive did not stop")
	}
	rearms := f.body("POST /sandboxes/" + held.ID() + "/timeout")
	if len(rearms) < 5 {
		t.Errorf("%d re-arms in 2.2 s with a 1 s TTL, want at least 5 (every TTL/6)", len(rearms))
	}
	for _, b := range rearms {
		var req struct{ Timeout int }
		if json.Unmarshal(b, &req) != nil || req.Timeout != 1 {
			t.Fatalf("re-arm body %s, want timeout 1", b)
		}
	}
	if n := f.callsOf("POST /sandboxes/" + dropped.ID() + "/timeout"); n > 1 {
		t.Errorf("the closed handle re-armed %d times", n)
	}
	// SetTimeout takes the deadline over: the sandbox goes while still held.
	if err := held.SetTimeout(ctx, ttl); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "expiry after SetTimeout", func() bool { return !f.has(held.ID()) })
}

// Labels, the Spec's env, working directory and user travel as metadata
// and envVars, and come back through List and through Connect from a fresh
// provider value; List follows X-Next-Token across pages.
func TestMetadataRoundTrip(t *testing.T) {
	t.Parallel()
	if _, err := user.Lookup("nobody"); err != nil {
		t.Skip("no user nobody on this host")
	}
	f := newFake(t, fakeOptions{})
	p := openProvider(t, f, nil)
	ctx := testCtx(t)
	run := randHex(4)
	spec := sandbox.Spec{
		Image:   "base",
		Labels:  map[string]string{"job": "j-" + run, "trial": "t1"},
		Env:     map[string]string{"FROM_SPEC": "spec value"},
		WorkDir: "/usr",
		User:    "nobody",
		Network: sandbox.Network{Mode: sandbox.NetworkPublic},
	}
	sb, err := p.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	var body struct {
		Metadata            map[string]string
		EnvVars             map[string]string
		Timeout             int
		AllowInternetAccess *bool `json:"allow_internet_access"`
	}
	if err := json.Unmarshal(f.body("POST /v2/sandboxes")[0], &body); err != nil {
		t.Fatal(err)
	}
	if body.Metadata["job"] != "j-"+run || body.EnvVars["FROM_SPEC"] != "spec value" ||
		body.Timeout != int(sandbox.DefaultTTL.Seconds()) || body.AllowInternetAccess == nil || !*body.AllowInternetAccess {
		t.Errorf("create body %+v", body)
	}

	// More sandboxes of the same job than one page holds (the fake's is 2).
	for range 3 {
		other, err := p.Create(ctx, sandbox.Spec{Image: "base", Labels: map[string]string{"job": "j-" + run}})
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
	}
	infos, err := openProvider(t, f, nil).List(ctx, map[string]string{"job": "j-" + run})
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 4 || f.callsOf("GET /v2/sandboxes") != 2 {
		t.Fatalf("list: %d sandboxes in %d pages, want 4 in 2", len(infos), f.callsOf("GET /v2/sandboxes"))
	}
	i := slices.IndexFunc(infos, func(i sandbox.Info) bool { return i.ID == sb.ID() })
	if i < 0 {
		t.Fatalf("list lacks %s", sb.ID())
	}
	got := infos[i]
	if len(got.Labels) != 2 || got.Labels["trial"] != "t1" || got.Image != "base" || got.State != "running" ||
		got.Provider != "e2b" || got.ExpiresAt.Before(time.Now()) {
		t.Errorf("listed info %+v, want the two labels alone, image, state, expiry", got)
	}

	again, err := openProvider(t, f, nil).Connect(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	res, err := again.Run(ctx, sandbox.Command{Args: []string{"sh", "-c", `printf '%s|%s|%s' "$(pwd)" "$(id -un)" "$FROM_SPEC"`}})
	if err != nil || string(res.Stdout) != "/usr|nobody|spec value" {
		t.Errorf("run through a connected handle: %q %q %v, want the Spec's dir, user and env", res.Stdout, res.Stderr, err)
	}
	// Exec sends the argv as given: no shell wraps it.
	res, err = again.Run(ctx, sandbox.Command{Args: []string{"printf", "%s", "$HOME;echo"}, User: "root", Dir: "/"})
	if err != nil || string(res.Stdout) != "$HOME;echo" {
		t.Errorf("argv passed through a shell: %q, %v", res.Stdout, err)
	}

	// A label the driver keeps its own data under is refused.
	_, err = p.Create(ctx, sandbox.Spec{Image: "base", Labels: map[string]string{"berth-workdir": "/"}})
	if sandbox.ClassOf(err) != sandbox.InvalidArgument {
		t.Errorf("reserved label: %v", err)
	}
	// No egress unless asked.
	none, err := p.Create(ctx, sandbox.Spec{Image: "base"})
	if err != nil {
		t.Fatal(err)
	}
	defer none.Close()
	if err := json.Unmarshal(f.body("POST /v2/sandboxes")[4], &body); err != nil || body.AllowInternetAccess == nil || *body.AllowInternetAccess {
		t.Errorf("network none sent allow_internet_access %v", body.AllowInternetAccess)
	}
	for _, id := range f.live() {
		_ = p.Delete(ctx, id)
	}
}

// Without E2B_SANDBOX_URL the data plane is https://49983-<id>.<domain>,
// the domain of the create answer winning over the configured one.
func TestDomainDataPlane(t *testing.T) {
	t.Parallel()
	f := newFake(t, fakeOptions{dataTLS: true, domain: "sandboxes.test"})
	// Every *.test host dials the fake's TLS data plane, whose certificate
	// is trusted.
	tr := f.data.Client().Transport.(*http.Transport).Clone()
	addr := f.data.Listener.Addr().String()
	var d net.Dialer
	tr.DialContext = func(ctx context.Context, network, host string) (net.Conn, error) {
		if strings.Contains(host, ".test:") {
			host = addr
		}
		return d.DialContext(ctx, network, host)
	}
	tr.TLSClientConfig = &tls.Config{RootCAs: tr.TLSClientConfig.RootCAs, ServerName: "example.com"}
	hc := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	p := openProvider(t, f, func(o *e2b.Options) {
		o.SandboxURL, o.Domain, o.HTTPClient = "", "configured.test", hc
	})
	ctx := testCtx(t)
	sb, err := p.Create(ctx, sandbox.Spec{Image: "base"})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	// The fake's sandboxes run on this host: a file under the test's temp
	// dir is a data-plane call that leaves nothing behind.
	if err := sb.WriteFile(ctx, filepath.Join(t.TempDir(), "e2b-domain"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if res, err := sb.Run(ctx, sandbox.Command{Args: []string{"true"}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %+v %v", res, err)
	}
	f.mu.Lock()
	hosts := slices.Clone(f.hosts)
	f.mu.Unlock()
	want := "49983-" + sb.ID() + ".sandboxes.test"
	if len(hosts) < 2 || slices.ContainsFunc(hosts, func(h string) bool { return h != want }) {
		t.Errorf("data-plane hosts %v, want only %s", hosts, want)
	}
	if err := sb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
}

// Connect finds a sandbox by id alone: an unknown one is NotFound, a
// malformed id InvalidArgument; when the details lack the envd token, the
// connect route supplies it without moving the deadline earlier.
func TestConnect(t *testing.T) {
	t.Parallel()
	f := newFake(t, fakeOptions{})
	p := openProvider(t, f, nil)
	ctx := testCtx(t)
	if _, err := p.Connect(ctx, "doesnotexist"); sandbox.ClassOf(err) != sandbox.NotFound {
		t.Errorf("unknown id: %v", err)
	}
	for _, id := range []string{"../sandboxes", "a/b", "x y", strings.Repeat("a", 200)} {
		if _, err := p.Connect(ctx, id); sandbox.ClassOf(err) != sandbox.InvalidArgument {
			t.Errorf("id %q: %v", id, err)
		}
	}
	sb, err := p.Create(ctx, sandbox.Spec{Image: "base", TTL: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	f.mu.Lock()
	f.noToken = true
	f.mu.Unlock()
	again, err := p.Connect(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if res, err := again.Run(ctx, sandbox.Command{Args: []string{"true"}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("run with the token from the connect route: %+v %v", res, err)
	}
	bodies := f.body("POST /v2/sandboxes/" + sb.ID() + "/connect")
	var req struct{ Timeout int }
	if len(bodies) != 1 || json.Unmarshal(bodies[0], &req) != nil || req.Timeout < 598 || req.Timeout > 600 {
		t.Errorf("connect bodies %s, want one with the remaining ~600 s", bodies)
	}
	if err := again.Delete(ctx); err != nil {
		t.Fatal(err)
	}
}

// Neither the API key nor a sandbox's access token reaches an error or a
// log line, even from a server that quotes them back.
func TestSecretsStayOut(t *testing.T) {
	t.Parallel()
	f := newFake(t, fakeOptions{})
	f.echoKey = true
	var logs syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx := testCtx(t)

	wrongKey := "e2b_wrong_" + randHex(8)
	bad := openProvider(t, f, func(o *e2b.Options) { o.APIKey = registry.Secret(wrongKey); o.Logger = log })
	_, err := bad.Create(ctx, sandbox.Spec{Image: "base"})
	if sandbox.ClassOf(err) != sandbox.Unauthenticated {
		t.Fatalf("wrong key: %v", err)
	}
	if strings.Contains(err.Error(), wrongKey) {
		t.Errorf("the key is in the error: %v", err)
	}

	p := openProvider(t, f, func(o *e2b.Options) { o.Logger = log })
	sb, err := p.Create(ctx, sandbox.Spec{Image: "base", TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	f.mu.Lock()
	token := f.sandbox(sb.ID()).token
	goodKey := f.key
	f.key = "rotated_" + randHex(8) // every further call of the driver is refused, its key quoted
	f.mu.Unlock()
	waitFor(t, ctx, "a failed re-arm logged", func() bool { return strings.Contains(logs.String(), "re-arming") })
	f.forget(sb.ID()) // the data plane now answers 502, quoting the token
	_, err = sb.ReadFile(ctx, "/etc/hostname")
	if err == nil || !strings.Contains(err.Error(), "[redacted]") {
		t.Fatalf("read of a forgotten sandbox: %v, want an error with the token redacted", err)
	}
	errs := []error{err, sb.SetTimeout(ctx, time.Minute), sb.Delete(ctx)}
	_, err = p.List(ctx, nil)
	errs = append(errs, err)
	for _, err := range errs {
		if err == nil {
			t.Fatal("a refused call succeeded")
		}
		for _, s := range []string{goodKey, token} {
			if strings.Contains(err.Error(), s) {
				t.Errorf("a secret is in the error: %v", err)
			}
		}
	}
	for _, s := range []string{goodKey, wrongKey, token} {
		if strings.Contains(logs.String(), s) {
			t.Errorf("a secret is in the logs:\n%s", logs.String())
		}
	}
}

// A mode other than 0644 survives a server that ignores ?mode= (upstream
// envd): the driver sets it itself.
func TestModeWithoutServerSupport(t *testing.T) {
	t.Parallel()
	f := newFake(t, fakeOptions{})
	f.dropMode = true
	p := openProvider(t, f, nil)
	ctx := testCtx(t)
	sb, err := p.Create(ctx, sandbox.Spec{Image: "base"})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	dir := "/tmp/e2b-mode-" + randHex(4)
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, m := range []os.FileMode{0o755, 0o600, 0o644} {
		path := dir + "/" + m.String()
		if err := sb.WriteFile(ctx, path, []byte("#!/bin/sh\necho ran\n"), m); err != nil {
			t.Fatal(err)
		}
		fi, err := sb.Stat(ctx, path)
		if err != nil || fi.Mode != uint32(m) {
			t.Errorf("%s: mode %o, %v", path, fi.Mode, err)
		}
	}
	res, err := sb.Run(ctx, sandbox.Command{Args: []string{dir + "/-rwxr-xr-x"}})
	if err != nil || string(res.Stdout) != "ran\n" {
		t.Errorf("uploaded script: %q %q %v", res.Stdout, res.Stderr, err)
	}
	if err := sb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
}
