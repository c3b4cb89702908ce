package podagent

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// startAgent runs Main on a loopback port, with the environment t set,
// until t ends, and returns its base URL.
func startAgent(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Main(ctx, Options{Listener: ln, Logf: t.Logf}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// shOut runs script with sh through c and returns its stdout; it must
// exit 0.
func shOut(ctx context.Context, t *testing.T, c *envd.Client, script string) string {
	t.Helper()
	var out strings.Builder
	p, err := c.Exec(ctx, driver.Command{Args: []string{"sh", "-c", script}, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(ctx); err != nil || code != 0 {
		t.Fatalf("sh -c %q: %d %v", script, code, err)
	}
	return out.String()
}

// The agent answers only calls whose token hashes to the configured hash;
// /health is open; its own variables stay out of the commands' environment.
func TestMainAuth(t *testing.T) {
	t.Setenv(EnvTokenSHA256, TokenHash("tok"))
	base := startAgent(t)
	hc := &http.Client{Timeout: 10 * time.Second}
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	anon, _ := envd.NewClient(base, hc)
	if err := anon.Health(cctx); err != nil {
		t.Fatalf("health without a token: %v", err)
	}
	if _, err := anon.Stat(cctx, "/"); errdefs.ClassOf(err) != errdefs.Unauthenticated {
		t.Errorf("stat without a token: %v", err)
	}
	wrong, _ := envd.NewClient(base, hc, envd.WithAccessToken(TokenHash("tok")))
	if _, err := wrong.Stat(cctx, "/"); errdefs.ClassOf(err) != errdefs.Unauthenticated {
		t.Errorf("stat with the hash as the token: %v", err)
	}
	c, _ := envd.NewClient(base, hc, envd.WithAccessToken("tok"))
	defer c.Close()
	if out := shOut(cctx, t, c, "env"); strings.Contains(out, EnvTokenSHA256) {
		t.Errorf("the token hash reached a command's environment")
	}
}

// A pooled agent (a warm pod) answers /health, and its claim with the
// pool's token, and nothing else: no envd call before the claim, no claim
// without the pool's token, no second claim, and after the claim only the
// sandbox's token opens it, with the claim's environment and directory.
func TestPooledAgent(t *testing.T) {
	t.Setenv(EnvTokenSHA256, TokenHash("pool"))
	t.Setenv(EnvPooled, "1")
	base := startAgent(t)
	hc := &http.Client{Timeout: 10 * time.Second}
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	anon, _ := envd.NewClient(base, hc)
	if err := anon.Health(cctx); err != nil {
		t.Fatalf("health of a pooled agent: %v", err)
	}
	pooled, _ := envd.NewClient(base, hc, envd.WithAccessToken("pool"))
	if _, err := pooled.Stat(cctx, "/"); err == nil {
		t.Errorf("an envd call before the claim was served")
	}
	dir := filepath.Join(t.TempDir(), "work")
	claim := Claim{TokenSHA256: TokenHash("sandbox"), Dir: dir, Env: map[string]string{"FROM_CLAIM": "yes"}}
	if err := PostClaim(cctx, hc, base, "not-the-pool", claim); errdefs.ClassOf(err) != errdefs.Unauthenticated {
		t.Errorf("a claim without the pool's token: %v", err)
	}
	bad := claim
	bad.Env = map[string]string{"A=B": "x"}
	if err := PostClaim(cctx, hc, base, "pool", bad); errdefs.ClassOf(err) != errdefs.InvalidArgument {
		t.Errorf("a claim with a bad variable name: %v", err)
	}
	if err := PostClaim(cctx, hc, base, "pool", claim); err != nil {
		t.Fatalf("claim: %v", err)
	}
	if err := PostClaim(cctx, hc, base, "pool", Claim{TokenSHA256: TokenHash("thief")}); errdefs.ClassOf(err) != errdefs.Unauthenticated {
		t.Errorf("a second claim with the pool's token: %v", err)
	}
	if _, err := pooled.Stat(cctx, "/"); errdefs.ClassOf(err) != errdefs.Unauthenticated {
		t.Errorf("the pool's token after the claim: %v", err)
	}
	c, _ := envd.NewClient(base, hc, envd.WithAccessToken("sandbox"))
	defer c.Close()
	out := shOut(cctx, t, c, "echo $FROM_CLAIM; pwd; env")
	if !strings.HasPrefix(out, "yes\n"+dir+"\n") {
		t.Errorf("the claim's settings: %q", out)
	}
	if strings.Contains(out, EnvPooled) || strings.Contains(out, EnvTokenSHA256) {
		t.Errorf("the agent's variables reached a command's environment")
	}
}
