package podagent

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/envd"
	"github.com/berth-sh/berth/sandbox/types"
)

// The agent answers only calls whose token hashes to the configured hash;
// /health is open; its own variables stay out of the commands' environment.
func TestMainAuth(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvTokenSHA256, TokenHash("tok"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Main(ctx, Options{Listener: ln, Logf: t.Logf}) }()
	defer func() { cancel(); <-done }()
	base := "http://" + ln.Addr().String()
	hc := &http.Client{Timeout: 10 * time.Second}
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	anon, _ := envd.NewClient(base, hc)
	if err := anon.Health(cctx); err != nil {
		t.Fatalf("health without a token: %v", err)
	}
	if _, err := anon.Stat(cctx, "/"); types.ClassOf(err) != types.Unauthenticated {
		t.Errorf("stat without a token: %v", err)
	}
	wrong, _ := envd.NewClient(base, hc, envd.WithAccessToken(TokenHash("tok")))
	if _, err := wrong.Stat(cctx, "/"); types.ClassOf(err) != types.Unauthenticated {
		t.Errorf("stat with the hash as the token: %v", err)
	}
	c, _ := envd.NewClient(base, hc, envd.WithAccessToken("tok"))
	defer c.Close()
	var out strings.Builder
	p, err := c.Exec(cctx, types.Command{Args: []string{"sh", "-c", "env"}, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(cctx); err != nil || code != 0 {
		t.Fatalf("env: %d %v", code, err)
	}
	if strings.Contains(out.String(), EnvTokenSHA256) {
		t.Errorf("the token hash reached a command's environment")
	}
}
